"""What differs between two problem signatures (``Problem.signature()``: name, constants, task and parameter
spaces, number of constraints), in words: the one wording of a model file, a source or a history written for
another problem (gptask.transfer.model_io, gptask.sources.measurements, gptask.data.storage)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["signature_differences"]


#: the signature's keys compared one by one above; any other is compared whole
_NAMED = {"name", "constants", "task_space", "param_space", "n_constraints"}
#: characters of an unnamed key's value shown
SHOWN_CHARS = 200


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _dimension_text(d: Any) -> str:
    if not isinstance(d, dict):
        return repr(d)
    if d.get("type") == "categorical":
        return f"one of {d.get('choices')}"
    return f"{d.get('type')} in [{d.get('lo')}, {d.get('hi')}]" + (" (log)" if d.get("log") else "")


def signature_differences(stored: dict[str, Any], mine: dict[str, Any], theirs: str = "the model's") -> list[str]:
    """What differs between a stored problem signature (``stored``: a model file's, a source's, a history's,
    named by ``theirs``) and a problem's (``mine``), one phrase each: ``constant cores: the model's 16, this
    problem's 2``, ``task dimension m: the model's integer in [128, 4000] (log), this problem's integer in [128,
    2000]``, the name, the number of constraints, any other key (the fidelity, the outputs) whole. "the signatures
    differ" when none of these does."""
    out = []
    if stored.get("name") != mine.get("name"):
        out.append(f"name: {theirs} {stored.get('name')!r}, this problem's {mine.get('name')!r}")
    sc, mc = stored.get("constants") or {}, mine.get("constants") or {}
    for k in sorted(set(sc) | set(mc)):
        if sc.get(k) != mc.get(k):
            out.append(f"constant {k}: {theirs} {sc.get(k, '(none)')}, this problem's {mc.get(k, '(none)')}")
    for space, label in (("task_space", "task"), ("param_space", "parameter")):
        sd = {d.get("name"): d for d in stored.get(space) or [] if isinstance(d, dict)}
        md = {d.get("name"): d for d in mine.get(space) or [] if isinstance(d, dict)}
        for name in list(sd) + [n for n in md if n not in sd]:
            if sd.get(name) != md.get(name):
                a = "(none)" if name not in sd else _dimension_text(sd[name])
                b = "(none)" if name not in md else _dimension_text(md[name])
                out.append(f"{label} dimension {name}: {theirs} {a}, this problem's {b}")
    if stored.get("n_constraints") != mine.get("n_constraints"):
        out.append(f"constraints: {theirs} {stored.get('n_constraints')}, this problem's {mine.get('n_constraints')}")
    for key in sorted(set(stored) | set(mine), key=str):  # the rest (fidelity, outputs, ...) as stored
        if key not in _NAMED and stored.get(key) != mine.get(key):
            out.append(f"{key}: {theirs} {_short(stored.get(key, '(none)'))}, this problem's "
                       f"{_short(mine.get(key, '(none)'))}")
    if not out:
        out.append("the signatures differ")
    return out
