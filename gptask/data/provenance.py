"""Where a measurement was made: the machine and software records of trials, histories and model files.

A run time means little without the machine that measured it. Every trial a tuner records carries a
*machine record*, a plain JSON dict::

    {"host": "node12", "os": "Linux-6.1.0-x86_64-with-glibc2.36",
     "cpu": "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "cores": 40, "usable_cores": 16,
     "memory_gib": 187.5, "accelerators": ["NVIDIA A100-PCIE-40GB (40960 MiB)"],
     "python": "3.11.4", "packages": {"gptask": "0.1.0", "numpy": "1.26.4", ...},
     "application": {"mpich": "4.0.2", "scalapack": "2.2.1", ...}}

* The host, operating system, CPU model, core counts and memory come from the standard library and
  ``/proc``; accelerators from ``nvidia-smi`` or ``rocm-smi`` when one is on the ``PATH`` (each
  asked once, with a timeout), else ``/proc/driver/nvidia``; packages from the installed
  distributions' metadata (:data:`PACKAGES`; nothing is imported to ask).
* ``application`` holds what the problem's own hook returns (``Problem(provenance=fn)``: the
  versions of MPI, BLAS, ScaLAPACK ... the application was built and runs with), called once per
  process and problem.

The record of this process is built once (:func:`this_machine`: 10-16 ms measured on the 2-core
development machine, plus one call of ``nvidia-smi`` where it exists) and a history stores each
distinct record once, referenced by its trials (:mod:`gptask.data.storage.sqlite`), so recording costs
one small row per trial (a tell took 4.0 ms instead of 2.1 ms there, 300 tells into a file history:
nothing next to runs of minutes).

**Identity.** Two records describe *the same machine* (:func:`same_machine`) when their
:func:`identity` agrees on every key both have, and they share one of label, CPU model or
accelerators: the identity is the label, the CPU model, the number of cores, the accelerators (model
names) and the application's versions. The host name, the memory as reported, the usable cores and
the Python packages are recorded but not compared: the nodes of one cluster partition are one
machine for tuning, whatever their names, and a patch release of numpy does not change a run time.
A record without the application's versions (``gptask tell`` knows no problem) matches one with
them. :func:`check_history` refuses to add trials of a
machine a history has not seen before next to those of another one, unless the user asked for it
(``gt.tune(..., mix_machines=True)``, ``--mix-machines``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["this_machine", "problem_record", "identity", "identity_key", "record_key", "describe", "history_rows", "same_machine", "machine_groups", "data_provenance", "data_machines",
           "check_record", "resolve_record", "check_history", "MachineMismatch", "PACKAGES",
           "MACHINE_KEYS", "flatten", "unflatten", "COLUMN_PREFIX", "ProvenanceError"]

log = logging.getLogger(__name__)

#: installed distributions whose versions every record lists (when installed)
PACKAGES = ("gptask", "numpy", "scipy", "torch", "mpi4py", "GPy", "pyswarms", "threadpoolctl")
#: the keys of a machine record (the JSON dict above); a record may carry only some of them
MACHINE_KEYS = ("label", "host", "os", "cpu", "cores", "usable_cores", "memory_gib", "accelerators", "python",
                "packages", "application")
#: the keys compared by :func:`identity`
IDENTITY_KEYS = ("label", "cpu", "cores", "accelerators", "application")
#: seconds an accelerator query (nvidia-smi, rocm-smi) may take
PROBE_TIMEOUT_S = 10.0
#: prefix of the machine columns of CSV exports and imports (``machine.cpu``, ``machine.cores``, ...)
COLUMN_PREFIX = "machine."

_LOCK = threading.Lock()
_THIS: dict[str, Any] | None = None


class ProvenanceError(ValueError):
    """A machine record that is not one (wrong types, unknown keys) or a provenance hook that failed."""


class MachineMismatch(ValueError):
    """Trials of different machines were about to be mixed in one history without the user's consent."""


# ---- this process's machine ---------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine()
    for key in ("model name", "Model", "cpu model", "Processor"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.MULTILINE)
    return None if m is None else round(int(m.group(1)) / 2**20, 1)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _run(cmd: list[str]) -> str | None:
    """The standard output of ``cmd``, or None when it is missing, fails or times out."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _accelerators() -> list[str]:
    """Model names (with memory) of the GPUs visible to this process, [] when none is visible."""
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
    if out:
        rows = [r.split(",") for r in out.strip().splitlines() if r.strip()]
        return [f"{r[0].strip()} ({r[1].strip()} MiB)" if len(r) > 1 else r[0].strip() for r in rows]
    out = _run(["rocm-smi", "--showproductname", "--csv"])
    if out:
        names = []
        for line in out.strip().splitlines()[1:]:
            cells = [c.strip() for c in line.split(",")]
            if len(cells) > 2 and cells[0].startswith("card"):
                names.append(cells[2] or cells[1])
        if names:
            return names
    found = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        try:
            m = re.search(r"^Model:\s*(.+)$", info.read_text(), re.MULTILINE)
        except OSError:
            continue
        if m:
            found.append(m.group(1).strip())
    return found


def _packages() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def this_machine(refresh: bool = False) -> dict[str, Any]:
    """The machine record of this process (module docstring), without ``application``; built once
    per process (``refresh=True`` builds it again). A copy: changing it changes nothing here."""
    global _THIS
    with _LOCK:
        if _THIS is None or refresh:
            _THIS = {"host": socket.gethostname(), "os": platform.platform(), "cpu": _cpu_model(),
                     "cores": os.cpu_count() or 1, "usable_cores": _usable_cores(), "memory_gib": _memory_gib(),
                     "accelerators": _accelerators(), "python": platform.python_version(),
                     "packages": _packages()}
            if _THIS["memory_gib"] is None:
                del _THIS["memory_gib"]
        return json.loads(json.dumps(_THIS))


def problem_record(problem: Any) -> dict[str, Any]:
    """This process's machine record with the application's versions from ``problem.provenance``
    (a function returning ``{name: version}``; called once per problem and kept on it). Raises
    ProvenanceError naming the problem when the hook raises or returns something else than a dict
    of texts or numbers."""
    record = this_machine()
    hook = getattr(problem, "provenance", None)
    if hook is None:
        return record
    cached = problem.__dict__.get("_provenance_record")
    if cached is None:
        try:
            raw = hook()
        except Exception as exc:  # noqa: BLE001 - re-raised with the problem named
            raise ProvenanceError(f"problem {problem.name!r}: its provenance hook raised "
                                  f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
            raise ProvenanceError(f"problem {problem.name!r}: its provenance hook must return a dict of "
                                  f"{{name: version}}, got {raw!r}")
        bad = {k: v for k, v in raw.items() if isinstance(v, bool) or not isinstance(v, (str, int, float))}
        if bad:
            raise ProvenanceError(f"problem {problem.name!r}: provenance values must be texts or numbers, got {bad}")
        cached = {k: raw[k] for k in sorted(raw)}
        problem.__dict__["_provenance_record"] = cached
    if cached:
        record["application"] = dict(cached)
    return record


# ---- records ----------------------------------------------------------------------------------------
def check_record(record: Any, where: str = "machine record") -> dict[str, Any]:
    """A validated copy of a machine record: a dict with keys among :data:`MACHINE_KEYS` (at least
    one), a ``label`` or ``host`` or ``cpu`` or ``accelerators`` saying which machine it is, and
    JSON values. A text is taken as ``{"label": text}`` (a name the user gives a machine).
    Raises ProvenanceError naming what is wrong."""
    if isinstance(record, str):
        if not record.strip():
            raise ProvenanceError(f"{where}: a machine label must not be empty")
        return {"label": record.strip()}
    if not isinstance(record, Mapping):
        raise ProvenanceError(f"{where} must be a dict (keys among {list(MACHINE_KEYS)}) or a label, got {record!r}")
    unknown = sorted(set(record) - set(MACHINE_KEYS))
    if unknown:
        raise ProvenanceError(f"{where}: unknown keys {unknown}; a machine record has keys among {list(MACHINE_KEYS)}")
    if not any(record.get(k) for k in ("label", "host", "cpu", "accelerators")):
        raise ProvenanceError(f"{where} does not say which machine it is: give at least a label, host, cpu or "
                              f"accelerators, got {dict(record)}")
    try:
        out = json.loads(json.dumps(dict(record), sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ProvenanceError(f"{where} is not plain JSON ({exc})") from None
    for key in ("cores", "usable_cores"):
        if key in out and (isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 1):
            raise ProvenanceError(f"{where}: {key} must be a positive integer, got {out[key]!r}")
    if "accelerators" in out and (not isinstance(out["accelerators"], list)
                                  or not all(isinstance(a, str) for a in out["accelerators"])):
        raise ProvenanceError(f"{where}: accelerators must be a list of names, got {out['accelerators']!r}")
    for key in ("packages", "application"):
        if key in out and not isinstance(out[key], dict):
            raise ProvenanceError(f"{where}: {key} must be a dict of name -> version, got {out[key]!r}")
    return out


def resolve_record(provenance: Any, problem: Any = None) -> dict[str, Any] | None:
    """The record a tuner stores with its trials: ``"auto"`` (this process, with the problem's
    application versions), None or False (record nothing), or a record or label given by the user
    (e.g. the compute node's, read from ``gptask machine`` output)."""
    if provenance is None or provenance is False:
        return None
    if isinstance(provenance, str) and provenance == "auto":
        return problem_record(problem) if problem is not None else this_machine()
    return check_record(provenance)


def _accelerator_model(name: str) -> str:
    return re.sub(r"\s*\(\d+\s*MiB\)$", "", name).strip()


def identity(record: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two records the same machine (module docstring): label, CPU model, cores,
    accelerator models, application versions (absent keys stay absent)."""
    out: dict[str, Any] = {}
    for key in IDENTITY_KEYS:
        if key in record and record[key] not in (None, "", [], {}):
            out[key] = sorted(_accelerator_model(a) for a in record[key]) if key == "accelerators" else record[key]
    return out


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:24]


def identity_key(record: Mapping[str, Any]) -> str:
    """A short hash of :func:`identity`."""
    return _digest(identity(record))


def same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether records ``a`` and ``b`` describe the same machine (module docstring)."""
    ia, ib = identity(a), identity(b)
    common = set(ia) & set(ib)
    return bool(common & {"label", "cpu", "accelerators"}) and all(ia[k] == ib[k] for k in common)


def machine_groups(machines: Mapping[int, Mapping[str, Any]]) -> list[list[int]]:
    """The ids of ``machines`` (id -> record) grouped by :func:`same_machine` (each id joins the
    first group whose first record it matches), in id order."""
    groups: list[list[int]] = []
    for mid in sorted(machines):
        for g in groups:
            if same_machine(machines[g[0]], machines[mid]):
                g.append(mid)
                break
        else:
            groups.append([mid])
    return groups


def record_key(record: Mapping[str, Any]) -> str:
    """A short hash of the whole record (what a history stores once)."""
    return _digest(dict(record))


def describe(record: Mapping[str, Any] | None) -> str:
    """One line for people: ``"node12: Intel Xeon Gold 6248 (40 cores, 187.5 GiB), NVIDIA A100; mpich
    4.0.2"``; ``"machine not recorded"`` for None."""
    if not record:
        return "machine not recorded"
    parts = []
    cpu = record.get("cpu")
    if cpu:
        extra = ", ".join(x for x in (f"{record['cores']} cores" if record.get("cores") else "",
                                      f"{record['memory_gib']} GiB" if record.get("memory_gib") else "") if x)
        parts.append(cpu + (f" ({extra})" if extra else ""))
    if record.get("accelerators"):
        parts.append(", ".join(record["accelerators"]))
    head = " / ".join(x for x in (record.get("label"), record.get("host")) if x)
    text = (head + ": " if head else "") + (", ".join(parts) if parts else "")
    app = record.get("application") or {}
    if app:
        text += "; " + ", ".join(f"{k} {v}" for k, v in app.items())
    return text.strip(": ") or "machine (no description)"


def history_rows(machines: Mapping[int, Mapping[str, Any]], trials: Any) -> list[tuple[str, str]]:
    """What ``gptask show`` and the report say of a history's machines: one ``("machine <id>",
    "<n> trial(s) on <description> [python <version>; <packages>]")`` per record (``n``: its finished
    trials), then ``("machine unknown", ...)`` when finished trials carry no record; [] when the
    history records no machine."""
    if not machines:
        return []
    finished = [t for t in trials if t.status.finished]
    rows = []
    for mid, record in sorted(machines.items()):
        n = sum(t.machine == mid for t in finished)
        packages = ", ".join(f"{k} {v}" for k, v in sorted((record.get("packages") or {}).items()))
        rows.append((f"machine {mid}", f"{n} trial(s) on {describe(record)}"
                     + (f" [python {record['python']}; {packages}]" if record.get("python") else "")))
    unknown = sum(t.machine is None for t in finished)
    if unknown:
        rows.append(("machine unknown", f"{unknown} trial(s) without a machine record"))
    return rows


# ---- columns of exports and imports ----------------------------------------------------------------------
def flatten(record: Mapping[str, Any] | None) -> dict[str, str]:
    """A record as ``machine.<key>`` text cells (lists and dicts as JSON text), {} for None."""
    if not record:
        return {}
    return {COLUMN_PREFIX + k: (json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else str(v))
            for k, v in record.items()}


def unflatten(cells: Mapping[str, Any], where: str = "row",
              seen: dict[tuple, dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The machine record in a row's ``machine.<key>`` cells (as :func:`flatten` writes them), None
    when the row has none or they are all empty. Raises ProvenanceError naming the row and cell.
    seen: records already made, by their cells' text (the rows of one machine repeat them:
    a new copy of the record is returned, not checked again; a caller's dict, issue 46)."""
    raw = {k[len(COLUMN_PREFIX):]: v for k, v in cells.items() if k.startswith(COLUMN_PREFIX)
           and v is not None and str(v).strip() != ""}
    if not raw:
        return None
    key = None if seen is None else tuple((k, type(v).__name__, repr(v)) for k, v in raw.items())
    if key is not None and key in seen:
        return _copied(seen[key])
    out = _unflattened(raw, where)
    if key is not None:
        seen[key] = _copied(out)
    return out


def _copied(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` that shares no list or dict with it (a record is flat JSON: text,
    numbers, a list of texts, a dict of texts)."""
    return {k: list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v for k, v in record.items()}


def _unflattened(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """:func:`unflatten` of the non-empty ``machine.*`` cells ``raw`` (their keys without the prefix)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in MACHINE_KEYS:
            raise ProvenanceError(f"{where}: column {COLUMN_PREFIX}{key} is not a machine key "
                                  f"(known: {list(MACHINE_KEYS)})")
        if not isinstance(value, str):
            out[key] = value
        elif key in ("accelerators", "packages", "application"):
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError:
                raise ProvenanceError(f"{where}: column {COLUMN_PREFIX}{key} holds {value!r}, not JSON") from None
        elif key in ("cores", "usable_cores"):
            try:
                out[key] = int(float(value))
            except ValueError:
                raise ProvenanceError(f"{where}: column {COLUMN_PREFIX}{key} holds {value!r}, not a number") from None
        elif key == "memory_gib":
            try:
                out[key] = float(value)
            except ValueError:
                raise ProvenanceError(f"{where}: column {COLUMN_PREFIX}{key} holds {value!r}, not a number") from None
        else:
            out[key] = value.strip()
    return check_record(out, where)


# ---- data sets ---------------------------------------------------------------------------------------
def data_provenance(trials: Any, machines: Mapping[int, Mapping[str, Any]], n_tasks: int) -> dict[str, Any]:
    """Where a model's data came from, as a model file stores it: ``{"machines": {"<id>": record},
    "tasks": [{"<id>": trials, "unknown": trials}, ...]}``, one entry per task counting its finished
    trials by machine (``"unknown"``: trials without a record)."""
    per_task: list[dict[str, int]] = [{} for _ in range(n_tasks)]
    used: set[int] = set()
    for t in trials:
        if not getattr(t, "status", None) or not t.status.finished or not 0 <= t.task_index < n_tasks:
            continue
        key = "unknown" if t.machine is None or t.machine not in machines else str(t.machine)
        if t.machine in machines:
            used.add(int(t.machine))
        per_task[t.task_index][key] = per_task[t.task_index].get(key, 0) + 1
    return {"machines": {str(k): dict(machines[k]) for k in sorted(used)}, "tasks": per_task}


def data_machines(provenance: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The machine records a model file's data came from (``data_provenance`` layout); [] when the
    file records none."""
    if not provenance:
        return []
    return [dict(r) for _, r in sorted((provenance.get("machines") or {}).items(), key=lambda kv: int(kv[0]))]


# ---- histories --------------------------------------------------------------------------------------
def check_history(machines: Mapping[int, Mapping[str, Any]], record: Mapping[str, Any] | None, allow_mix: bool,
                  where: str, switch: str = "mix_machines=True") -> bool:
    """Whether adding trials measured on ``record`` to a history whose trials were measured on
    ``machines`` (id -> record) mixes machines; raises MachineMismatch when it would and
    ``allow_mix`` is False. A machine the history has already seen is never a mix; nor is a
    history without recorded machines, or a trial without a record."""
    if record is None or not machines:
        return False
    seen = {identity_key(r): r for r in machines.values()}
    if any(same_machine(record, r) for r in seen.values()):
        return False
    if not allow_mix:
        listed = "; ".join(describe(r) for r in seen.values())
        raise MachineMismatch(f"{where} holds trials measured on {listed}; this process runs on {describe(record)}. "
                              f"A history mixes machines only when asked: pass {switch} to add this machine's "
                              f"trials to it, or use another history")
    log.warning("%s: adding trials of %s next to those of %d other machine(s), as asked", where, describe(record),
                len(seen))
    return True

