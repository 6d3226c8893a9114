"""Saved model files: everything needed for run-free prediction, in one JSON file, no pickle.

Layout (format tag ``"gptask.model"``, ``"version": 2``)::

    {"format": "gptask.model", "version": 2, "gptask_version": ..., "created": <ISO 8601 UTC>,
     "problem":   problem signature (name, task_space, param_space, constants, n_constraints),
     "tasks":     [task dict, ...],
     "best":      [{"params": {...}, "value": float} or null, ...]   (one per task),
     "transform": OutputTransform.to_json(),
     "lcm":       {"encoding": "npz-base64", "data": ...}   (LCM.save bytes, base64),
     "tla1":      {"task_X": [[...]], "optima": [[...]],
                   "gps": [{"mu": m, "sd": s, "lcm": {...} or null}, ...]}   (one per encoded column)
                  or null (no tuned task),
     "extended_since_fit": int,
     "accuracy":  {"summary": {...}, "rows": [...]} or null   (leave-one-task-out report),
     "joint":     {"names": [...], "lo": [...], "hi": [...], "use_cost": bool, "mu": m, "sd": s,
                   "lcm": {...}}   (only when the problem declares features or a cost model:
                  gptask.transfer.joint; predicting a new task with it needs problem=),
     "metadata":  {...}   (optional: what the writer wants kept with the model, e.g. the machine,
                  the training data and its accuracy for a model card; read by read_metadata),
     "recommended": [Recommendation.to_json() or null, ...]   (a tuning result's recommendation per
                  task by gptask.results.recommend's rule, as gptask show prints it; read_recommendations),
     "unit":      the objective's unit ("s"; "" for none; with "recommended", or whenever known),
     "provenance": {"machines": {"<id>": machine record}, "tasks": [{"<id>" | "unknown": trials}, ...]}
                  the machines the model's data were measured on (gptask.data.provenance.data_provenance),
                  or null when they are unknown (a model of a model file written before them),
     "outputs":   {"primary": name, "models": {name: {"transform": ..., "lcm": {...}}}, "fronts":
                  [[{"params": {...}, "values": {...}, "evaluations": k}, ...] or null, ...]}
                  (only for a problem with named outputs, gptask.problem.objectives: "lcm" and "transform"
                  above model the primary objective, "models" every other modelled output, each
                  of ``sign * value``, -1 for a maximised objective; "fronts": each task's observed
                  front, gptask.results.fronts.task_front, for a tuning result),
     "checksum":  "sha256:<hex of the canonical JSON of every other key>"}

Versions: 2 added ``provenance``. Version-1 files (written before it) still load, with
``provenance`` None: their data's machines are unknown. A model file can be a source of
:mod:`gptask.sources.multisource` (its LCM's data, decoded, with the provenance's machines).

Arrays that must be bit-exact (the LCM's data, Cholesky factor and weights) travel as the
``.npz`` bytes that :meth:`LCM.save` writes (read back with ``allow_pickle=False``), base64-encoded;
so a loaded model predicts bit for bit what the saved one did. Floats elsewhere are JSON numbers
(Python writes the shortest repr that reads back exactly). Constraints and the objective are code
and are not stored: pass ``problem=`` to :func:`load_model` to have them (checked against the
stored signature).

What loading trusts: the checksum catches accidents (a truncated copy, a hand edit); it is not an
authenticity check, since anyone can recompute it, so load model files only from sources you trust
as you would any data that steers your runs. A crafted file still cannot run code (JSON and
``allow_pickle=False``) nor make loading exhaust the machine: files over :data:`MODEL_FILE_MAX_BYTES`
are refused unread, the ``.npz`` members must be stored uncompressed as :meth:`LCM.save` writes them
(no zip bomb), every ``.npy`` header's shape must account for exactly the bytes its member holds and
agree with the other arrays' (checked before numpy allocates anything), and a NaN or infinity
anywhere (a JSON number or an array value) refuses the file, so a model never predicts ``nan``.

Over 500 lines on purpose: the model file's writer, reader and checks (checksum, version, problem
signature and its differences in words) are one file format, defined in one place.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import io
import json
import logging
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..core.labels import check_unit
from ..core.signatures import signature_differences
from ..model.numerics import LCM
from ..core.output_files import MODEL_FORMAT, refuse_overwriting_a_history
from ..problem.definition import Problem
from ..space.dimensions import Space
from .accuracy import transfer_accuracy
from .joint import JointModel
from .model import OptimaModel, ScalarGP, TransferModel, as_transfer_model
from ..model.transforms import OutputTransform

__all__ = ["FORMAT", "VERSION", "save_model", "load_model", "read_metadata", "read_recommendations", "read_provenance",
           "file_version",
           "ModelFileError", "model_document", "model_from_document"]

FORMAT = MODEL_FORMAT
VERSION = 2
#: model files larger than this are refused unread (a model at 20,000 points, far beyond what the
#: exact fit is built for, takes about 4.3 GB of base64; the shipped ones take 0.3-0.6 MB)
MODEL_FILE_MAX_BYTES = 8 << 30
#: the arrays of an LCM block (:meth:`LCM.save`) and the dimensions each shape must have, by name:
#: n points, d input columns, Q latent processes, T tasks, r the rank
_LCM_SHAPES = {"X": ("n", "d"), "t": ("n",), "y": ("n",), "L": ("n", "n"), "z": ("n",), "alpha": ("n",),
               "lengthscale": ("Q", "d"), "W": ("Q", "G", "r"), "kappa": ("Q", "G"), "noise": ("T",), "meta": ()}
#: G, the rows of W and kappa: the tasks, or on a model of fidelity levels its base tasks (meta's "levels": a base
#: task and a level per task, LCM.save)


class ModelFileError(ValueError):
    """A file that is not a gptask model file, is corrupted, or does not match the problem."""


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} {obj!r} in a model file")


def _canonical(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_json_default)


def _checksum(body: dict) -> str:
    return "sha256:" + hashlib.sha256(_canonical(body).encode()).hexdigest()


def _lcm_to_json(model: LCM) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lcm.npz"
        model.save(path)
        raw = path.read_bytes()
    return {"encoding": "npz-base64", "data": base64.b64encode(raw).decode("ascii")}


def _lcm_from_json(d: Any) -> LCM:
    if not isinstance(d, dict) or d.get("encoding") != "npz-base64" or not isinstance(d.get("data"), str):
        raise ValueError("LCM entry is not an npz-base64 block")
    raw = base64.b64decode(d["data"].encode("ascii"), validate=True)
    _check_npz(raw)
    return LCM.load(io.BytesIO(raw))


def _npy_header(fh: Any, name: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header bytes) of the ``.npy`` member open in ``fh``; reads the header only."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"array {name}: .npy format version {version} is not one gptask writes")
    return tuple(int(n) for n in shape), dtype, fh.tell()


def _check_npz(raw: bytes) -> None:
    """Refuse an LCM block (:meth:`LCM.save`'s ``.npz`` bytes) whose members are compressed, whose
    ``.npy`` headers claim other sizes than their members hold or shapes that disagree, or whose
    arrays hold NaN or infinity: the headers are checked before any array is read."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile as exc:
        raise ValueError(f"the LCM block is not an npz archive ({exc})") from None
    dims: dict[str, int] = {}
    with zf:
        infos = zf.infolist()
        for info in infos:
            name = info.filename
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"array {name} of the LCM block is compressed: gptask writes them stored (uncompressed), "
                                 "and a compressed one could inflate to any size")
            if info.file_size > len(raw):
                raise ValueError(f"array {name} of the LCM block claims {info.file_size} bytes in a {len(raw)}-byte block")
            with zf.open(info) as fh:
                shape, dtype, header = _npy_header(fh, name)
            if dtype.hasobject or dtype.kind not in "fiuU":
                raise ValueError(f"array {name} of the LCM block has dtype {dtype}: only numbers (and text) are read")
            nbytes = math.prod(shape) * dtype.itemsize
            if header + nbytes != info.file_size:
                raise ValueError(f"array {name} of the LCM block claims shape {shape} ({nbytes:,} bytes of {dtype}) "
                                 f"but holds {info.file_size - header:,} bytes")
            key = name.removesuffix(".npy")
            want = _LCM_SHAPES.get(key)
            if want is None:
                raise ValueError(f"the LCM block holds an unknown array {name}")
            if len(shape) != len(want):
                raise ValueError(f"array {key} of the LCM block has shape {shape}, expected {len(want)} dimensions "
                                 f"{want}")
            for n, label in zip(shape, want):
                if dims.setdefault(label, n) != n:
                    raise ValueError(f"array {key} of the LCM block has shape {shape}: its {label} = {n} disagrees "
                                     f"with the other arrays' {label} = {dims[label]}")
        missing = sorted(set(_LCM_SHAPES) - {i.filename.removesuffix(".npy") for i in infos})
        if missing:
            raise ValueError(f"the LCM block lacks the arrays {missing}")
    with np.load(io.BytesIO(raw), allow_pickle=False) as arrays:  # sizes known and bounded by the block now
        for key in _LCM_SHAPES:
            a = arrays[key]
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                raise ValueError(f"array {key} of the LCM block holds non-finite values ({int((~np.isfinite(a)).sum())} "
                                 "NaN or inf)")
            if key == "t" and a.size and (a.min() < 0 or a.max() >= dims.get("T", 0)):
                raise ValueError(f"array t of the LCM block holds task indices outside 0..{dims.get('T', 0) - 1}")
        _check_groups(str(arrays["meta"]), dims.get("T", 0), dims.get("G", 0))


def _check_groups(meta: str, T: int, G: int) -> None:
    """Refuse an LCM block whose coregionalization rows G disagree with its T tasks: G = T, or on a model of
    fidelity levels (meta's "levels") one base task in 0..G-1, every one used, and a level in [0, 1] per task."""
    try:
        levels = json.loads(meta).get("levels")
    except (ValueError, AttributeError):
        raise ValueError("the LCM block's meta is not a JSON object") from None
    if levels is None:
        if G != T:
            raise ValueError(f"the LCM block has {G} rows of W and kappa for {T} tasks (and no fidelity levels)")
        return
    spec = levels if isinstance(levels, dict) else {}
    group, level = spec.get("group"), spec.get("level")
    if not (isinstance(group, list) and isinstance(level, list) and len(group) == len(level) == T):
        raise ValueError(f"the LCM block's fidelity levels do not give a base task and a level for each of its {T} "
                         "tasks")
    if any(isinstance(g, bool) or not isinstance(g, int) for g in group) or sorted(set(group)) != list(range(G)):
        raise ValueError(f"the LCM block's fidelity levels name base tasks other than 0..{G - 1} (its rows of W and "
                         "kappa), each at least once")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0 for v in level):
        raise ValueError("the LCM block's fidelity levels hold a level outside [0, 1]")


def _finite_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is not finite")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _clean(v: Any) -> Any:
    """Non-finite floats -> None (strict JSON), recursively."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    return v


def save_model(source: Any, path: str | os.PathLike, accuracy: bool = True,
               metadata: dict[str, Any] | None = None) -> Path:
    """Write a model file for ``source`` (a TuningResult, a TransferResult or a loaded model).

    accuracy: compute and store the leave-one-task-out report (:func:`transfer_accuracy`), shown by
    ``gptask predict``; skipped (stored as null) when fewer than 3 tasks are tuned. metadata: a
    JSON-ready dict kept in the file under the checksum (:func:`read_metadata`). Returns the path.
    """
    refuse_overwriting_a_history(path, "the model file")
    tm = as_transfer_model(source)
    report = tm.accuracy
    if accuracy and report is None:
        try:
            rep = transfer_accuracy(tm)
            report = {"summary": rep.summary(), "rows": rep.rows}
        except ValueError as exc:
            report = None
            logging.getLogger(__name__).info("no accuracy report stored: %s", exc)
    try:
        opt = tm.optima
    except ValueError as exc:  # no tuned task: no TLA1 (predict_optimum will say why)
        logging.getLogger(__name__).info("no TLA1 model stored: %s", exc)
        opt = None
    body = {
        "format": FORMAT,
        "version": VERSION,
        "gptask_version": _version(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "problem": tm.signature,
        "tasks": tm.tasks,
        "best": [None if b is None else {"params": b[0], "value": float(b[1])} for b in tm.best],
        "transform": tm.transform.to_json(),
        "lcm": _lcm_to_json(tm.model),
        "tla1": None if opt is None else {
            "task_X": opt.task_X.tolist(), "optima": opt.optima.tolist(),
            "gps": [{"mu": g.mu, "sd": g.sd, "lcm": None if g.gp is None else _lcm_to_json(g.gp)} for g in opt.gps],
        },
        "extended_since_fit": tm.extended_since_fit,
        "accuracy": _clean(report),
        "provenance": tm.provenance,
    }
    recommended = _recommendations(source)
    if recommended is not None:  # a tuning result: its recommendations by the one rule (gptask.results.recommend)
        body["recommended"] = _clean(recommended)
    unit = getattr(getattr(source, "problem", None), "unit", "") or tm.unit
    if unit or recommended is not None:  # kept so that tools without the problem know it (export-table)
        body["unit"] = unit
    joint = tm.stored_joint if tm.problem is None else tm.joint()
    if joint is not None:  # only when there is one: files of problems without features stay as they were
        body["joint"] = {"names": joint.names, "lo": joint.lo.tolist(), "hi": joint.hi.tolist(),
                         "use_cost": joint.use_cost, "mu": joint.mu, "sd": joint.sd, "lcm": _lcm_to_json(joint.gp)}
    named = _named_outputs(source, tm)
    if named is not None:
        body["outputs"] = named
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
        body["metadata"] = _clean(metadata)
    body = json.loads(_canonical(body))  # plain JSON types only (and fails early on what is not)
    doc = {**body, "checksum": _checksum(body)}
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False))
    os.replace(tmp, path)
    return path


def _named_outputs(source: Any, tm: TransferModel) -> dict[str, Any] | None:
    """The "outputs" entry of a model file (module docstring), None for a problem with one number."""
    spec = tm.signature.get("outputs")
    if not spec:
        return None
    primary = spec["objectives"][0][0]
    fitted = getattr(source, "outputs", None) or {}
    models = {name: {"transform": tr.to_json(), "lcm": _lcm_to_json(model)}
              for name, (model, tr) in fitted.items() if name != primary and model is not None}
    fronts = getattr(source, "stored_fronts", None)
    if fronts is None and hasattr(source, "pareto") and hasattr(source, "records"):
        fronts = [[{"params": p.params, "values": p.values, "evaluations": p.evaluations} for p in source.pareto(i)]
                  for i in range(len(source.tasks))]
    return {"primary": primary, "models": models, "fronts": fronts}


def _recommendations(source: Any) -> list[dict[str, Any] | None] | None:
    """Per task of a TuningResult ``source``, its recommendation (``Recommendation.to_json``: the
    same rule as ``gptask show`` and the apps' tables, reading the confirmation runs the result
    holds; None for a task with nothing to recommend: no complete evaluation, or none meeting the
    limits); None for other sources."""
    from ..results.recommend import nothing_to_recommend, recommend

    if not (hasattr(source, "recommend") and hasattr(source, "confirmations") and hasattr(source, "records")):
        return None  # a loaded model or another source: no evaluations to recommend from
    return [recommend(source, i, progress=False).to_json() if nothing_to_recommend(source, i) is None else None
            for i in range(len(source.tasks))]


def read_recommendations(path: str | os.PathLike) -> list[dict[str, Any] | None]:
    """The per-task recommendations a model file was saved with (``recommended``; [] when the file
    has none, e.g. a model of imported data saved before this key existed)."""
    recs = _read_document(path).get("recommended")
    if recs is None:
        return []
    if not isinstance(recs, list):
        raise ModelFileError(f"{path}: corrupted model file (recommended is {type(recs).__name__}, not a list)")
    return recs


def _version() -> str:
    from .. import __version__

    return __version__


def _read_document(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON document of a model file, after the format, version and checksum checks."""
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"no model file at {p}")
    size = p.stat().st_size
    if size > MODEL_FILE_MAX_BYTES:
        raise ModelFileError(f"{p} is larger than a gptask model file may be ({size:,} bytes, the limit is "
                             f"{MODEL_FILE_MAX_BYTES:,}): not read")
    return model_document(p.read_bytes(), str(p))


def model_document(raw: bytes, name: str) -> dict[str, Any]:
    """The JSON document of a model file whose bytes are ``raw`` (``name``: the file, for messages),
    after the size, format, version and checksum checks (ModelFileError)."""
    p = name
    if raw.startswith(b"SQLite format 3\x00"):
        raise ModelFileError(f"{p} is an SQLite file (a gptask history?), not a gptask model file: a run writes "
                             "one with `gptask tune ... --save-model FILE` (on a finished history the same command "
                             "runs nothing and writes it) or gt.save_model(result, FILE)")
    if len(raw) > MODEL_FILE_MAX_BYTES:
        raise ModelFileError(f"{p} is larger than a gptask model file may be ({len(raw):,} bytes, the limit is "
                             f"{MODEL_FILE_MAX_BYTES:,}): not read")
    try:
        doc = json.loads(raw.decode("utf-8"), parse_float=_finite_number, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{p} is not a gptask model file, or is truncated (not valid JSON: {exc})") from None
    except ValueError as exc:  # NaN, Infinity, 1e999: a model file holds finite numbers only
        raise ModelFileError(f"{p}: corrupted model file ({exc}; a model file holds finite numbers only)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ModelFileError(f"{p} is not a gptask model file (format tag {found!r}, expected {FORMAT!r})")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ModelFileError(f"{p}: corrupted model file (version {version!r})")
    if version > VERSION:
        raise ModelFileError(f"{p} was written with model format version {version}; this gptask reads "
                             f"versions up to {VERSION}: upgrade gptask")
    body = {k: v for k, v in doc.items() if k != "checksum"}
    if doc.get("checksum") != _checksum(body):
        raise ModelFileError(f"{p}: corrupted model file (checksum mismatch: the file was modified or truncated)")
    return doc


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``metadata`` a model file was saved with (``save_model(..., metadata=...)``), {} when
    none; the file is checked as :func:`load_model` checks it (ModelFileError)."""
    meta = _read_document(path).get("metadata")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: corrupted model file (metadata is {type(meta).__name__}, not an object)")
    return meta


def _provenance(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The ``provenance`` of a model file document (None for version 1 or null); ValueError when
    it is not the layout of :func:`gptask.data.provenance.data_provenance`."""
    from ..data.provenance import check_record

    raw = doc.get("provenance")
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("machines"), dict) or not isinstance(raw.get("tasks"), list):
        raise ValueError(f"provenance is not {{machines, tasks}}: {str(raw)[:120]}")
    for k, record in raw["machines"].items():
        check_record(record, f"provenance machine {k}")
    return raw


def read_provenance(path: str | os.PathLike) -> dict[str, Any] | None:
    """The machines a model file's data were measured on (``provenance``; None when the file does
    not record them: version 1, or a model whose data's machines were unknown)."""
    p = Path(path)
    try:
        return _provenance(_read_document(p))
    except ValueError as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{p}: corrupted model file ({exc})") from None


def file_version(path: str | os.PathLike) -> int:
    """The format version a model file was written with (after the checks of :func:`load_model`)."""
    return int(_read_document(path)["version"])


def load_model(path: str | os.PathLike, problem: Problem | None = None) -> TransferModel:
    """Read a model file written by :func:`save_model` (or ``result.save_model``). For a problem
    with named outputs the model also has ``outputs`` (name -> (LCM, OutputTransform) of every
    modelled output but the primary one) and ``stored_fronts`` (each task's front as saved).

    problem: the :class:`Problem` the model was built for, to give predictions its constraints and
    ``tune_new_task`` its objective; its signature must match the stored one. Raises
    :class:`ModelFileError` (a ValueError) for a file that is not ours, is corrupted, was written
    by a newer format, or belongs to another problem.
    """
    if problem is not None and not isinstance(problem, Problem):
        raise TypeError(f"problem must be a gptask.Problem, got {type(problem).__name__}")
    return model_from_document(_read_document(path), problem, str(Path(path)))


def model_from_document(doc: dict[str, Any], problem: Problem | None, name: str) -> TransferModel:
    """The model of a model file's checked document (:func:`model_document`); ``name``: the file,
    for messages; the rest as :func:`load_model`."""
    p = name
    try:
        sig = doc["problem"]
        task_space = Space.from_json(sig["task_space"])
        param_space = Space.from_json(sig["param_space"])
        tasks = [task_space.validate(t, what="stored task") for t in doc["tasks"]]
        best = [None if b is None else (param_space.validate(b["params"], what="stored best"), float(b["value"]))
                for b in doc["best"]]
        transform = OutputTransform.from_json(doc["transform"])
        model = _lcm_from_json(doc["lcm"])
        t1 = doc["tla1"]
        optima = None
        if t1 is not None:
            gps = [ScalarGP(float(g["mu"]), float(g["sd"]), None if g["lcm"] is None else _lcm_from_json(g["lcm"]))
                   for g in t1["gps"]]
            optima = OptimaModel(np.asarray(t1["task_X"], float), np.asarray(t1["optima"], float), gps)
            if len(gps) != param_space.n_columns:
                raise ValueError(f"{len(gps)} TLA1 GPs for {param_space.n_columns} parameter columns")
        j = doc.get("joint")
        joint = None if j is None else JointModel([str(n) for n in j["names"]], np.asarray(j["lo"], float),
                                                  np.asarray(j["hi"], float), bool(j["use_cost"]), float(j["mu"]),
                                                  float(j["sd"]), _lcm_from_json(j["lcm"]))
        tm = TransferModel(task_space, param_space, sig, tasks, best, model, transform, problem=None,
                           optima=optima, accuracy=doc.get("accuracy"), joint=joint,
                           extended_since_fit=int(doc.get("extended_since_fit", 0)),
                           provenance=_provenance(doc), unit=check_unit(doc.get("unit", "")))
        named = doc.get("outputs")
        if named is not None:  # every other output's model, and the fronts (module docstring)
            tm.outputs = {str(n): (_lcm_from_json(m["lcm"]), OutputTransform.from_json(m["transform"]))
                          for n, m in named["models"].items()}
            tm.stored_fronts = named.get("fronts")
    except (KeyError, TypeError, ValueError, IndexError, binascii.Error, zipfile.BadZipFile, OSError) as exc:
        raise ModelFileError(f"{p}: corrupted model file ({type(exc).__name__}: {exc})") from None
    if problem is not None:
        mine = json.loads(json.dumps(problem.signature(), sort_keys=True, default=str))
        stored = json.loads(json.dumps(sig, sort_keys=True, default=str))
        if mine != stored:
            raise ModelFileError(f"{p} was saved for another problem: " + "; ".join(signature_differences(stored, mine)))
        tm.problem = problem
    return tm
