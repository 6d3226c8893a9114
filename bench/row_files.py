"""A benchmark's rows in one JSON file, appended run by run so that a killed benchmark resumes
(shared by bench/cross_machine.py and bench/leave_one_gpu_out.py)."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from machine import describe_machine, load_average


def load_rows(path: str) -> dict[str, Any]:
    """The file's ``{"machine": ..., "rows": [...]}`` (gzip-compressed when its name ends in .gz: a result
    kept in the repository), or a new one describing this machine."""
    p = Path(path)
    if p.exists():
        return json.loads(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_text())
    return {"machine": {"description": describe_machine(), "load_average": load_average(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, "rows": []}


def save_rows(path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` (all rows so far) to ``path``."""
    Path(path).write_text(json.dumps(doc, indent=1))


def done_keys(path: Path, fields: Sequence[str]) -> set[tuple]:
    """The ``fields`` of every row of a JSON-lines file as tuples (empty when there is no file): what a run
    that appends rows skips."""
    if not path.exists():
        return set()
    return {tuple(r[f] for f in fields) for r in map(json.loads, filter(None, path.read_text().splitlines()))}


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` or ``"0,3,5-7"`` -> the seeds."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def command_line(description: str, default_out: Path, run: Callable[[list[int], str], None],
                 report: Callable[[dict[str, Any]], str], argv: list[str] | None = None,
                 quiet: Sequence[str] = ()) -> int:
    """``run [--seeds S] [--out F]`` calls ``run(seeds, out)``; ``report [--out F]`` prints
    ``report(rows of F)``. quiet: loggers set to ERROR (one line per recorded failure otherwise)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("command", choices=["run", "report"])
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    ap.add_argument("--out", default=str(default_out))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in quiet:
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.command == "run":
        run(args.seeds, args.out)
    else:
        print(report(load_rows(args.out)))
    return 0


def run_per_gpu(out: str, seeds: Sequence[int], gpus: Sequence[str],
                run_one: Callable[[str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """``run_one(gpu, seed)`` for every seed and GPU whose row ("gpu", "seed") is not in ``out``
    yet, each row saved as it comes (a killed run resumes); returns the new rows."""
    doc = load_rows(out)
    done = {(r["gpu"], r["seed"]) for r in doc["rows"]}
    new = []
    for seed in seeds:
        for gpu in gpus:
            if (gpu, seed) not in done:
                new.append(run_one(gpu, seed))
                doc["rows"].append(new[-1])
                save_rows(out, doc)
    return new
