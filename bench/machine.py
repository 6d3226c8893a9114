"""The machine a benchmark ran on: a one-line description and its load (shared by the bench scripts)."""

from __future__ import annotations

import os
import platform
import subprocess


def describe_machine() -> str:
    """CPU model (from lscpu), core count, Python version and platform, as one line."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    except OSError:
        model = platform.processor() or "?"
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``"1.02 0.87 0.66"``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
