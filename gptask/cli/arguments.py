"""The text arguments of the command line: ``k=v,...`` tasks, configurations and outputs,
``--max-failures`` and ``--failure-model``; and plain tables."""

from __future__ import annotations
import argparse
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ['parse_assignments', 'format_assignments', 'format_table', 'max_failures_arg', 'failure_model_arg', 'FAILURE_MODEL_HELP']


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _scalar(text: str) -> Any:
    """'12' -> 12, '1.5' -> 1.5, 'true' -> True; anything else (including 'nan', 'inf') stays a
    string. Nothing is evaluated."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        return text
    return v if math.isfinite(v) else text


def parse_assignments(text: str, what: str = "argument") -> dict[str, Any]:
    """Parse ``"m=5000,n=3000,alg=ring"`` into ``{"m": 5000, "n": 3000, "alg": "ring"}``.

    Keys are identifiers, or JSON strings in double quotes for any other name (``"a,b"=1``, a name
    holding a comma, an equals sign, a tab or a space); values are ints, finite floats, true/false or
    strings; a value in double quotes is a JSON string, taken as it is (``alg="a,b"``,
    ``flag="true"``): what :func:`format_assignments` writes for text with a comma, a quote, an
    equals sign, padding or that would read as a number. An empty text gives ``{}``; a malformed
    item or a repeated key raises ``ValueError`` naming ``what``.
    """
    out: dict[str, Any] = {}
    if not text or not text.strip():
        return out
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        bad = f"{what}: expected comma-separated key=value pairs"
        lead = len(text[pos:]) - len(text[pos:].lstrip())
        if text[pos + lead:].startswith('"'):  # a quoted key: up to its closing quote, then '='
            try:
                key, stop = decoder.raw_decode(text, pos + lead)
            except json.JSONDecodeError:
                raise ValueError(f"{bad}, got an unterminated quoted name in {text!r}") from None
            after = text[stop:].lstrip()
            if not after.startswith("="):
                raise ValueError(f"{bad}, got a quoted name {key!r} without '=' after it in {text!r}")
            start_value = len(text) - len(after) + 1
            quoted_key = True
        else:
            eq = text.find("=", pos)
            comma = text.find(",", pos)
            if eq < 0 or 0 <= comma < eq:
                item = text[pos:] if comma < 0 else text[pos:comma]
                raise ValueError(f"{bad}, got {item!r} in {text!r}")
            key, start_value, quoted_key = text[pos:eq].strip(), eq + 1, False
        value_text = text[start_value:]
        if value_text.lstrip().startswith('"'):  # a quoted value: up to its closing quote
            start = start_value + len(value_text) - len(value_text.lstrip())
            try:
                parsed, stop = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                raise ValueError(f"{bad}, got an unterminated quoted value in {text!r}") from None
            rest = text[stop:]
            if rest.strip() and not rest.lstrip().startswith(","):
                raise ValueError(f"{bad}, got {rest.strip()!r} after a quoted value in {text!r}")
            end = -1 if not rest.strip() else stop + rest.index(",")
            value_out: Any = parsed
        else:
            comma = text.find(",", start_value)
            end = comma
            value = (text[start_value:] if comma < 0 else text[start_value:comma]).strip()
            if not value:
                item = text[pos:] if comma < 0 else text[pos:comma]
                raise ValueError(f"{bad}, got {item.strip()!r} in {text!r}")
            value_out = _scalar(value)
        if not quoted_key and not _KEY.fullmatch(key):
            item = text[pos:] if end < 0 else text[pos:end]
            raise ValueError(f"{bad}, got {item!r} in {text!r} (a name that is not an identifier goes in double "
                             "quotes: \"a b\"=1)")
        if key in out:
            raise ValueError(f"{what}: key {key!r} given twice in {text!r}")
        out[key] = value_out
        if end < 0:
            return out
        pos = end + 1


def _needs_quotes(value: str) -> bool:
    return (value != value.strip() or not value or any(c in value for c in ',="\\') or not value.isprintable()
            or not isinstance(_scalar(value), str))


def format_assignments(values: Mapping[str, Any]) -> str:
    """``{"m": 5000, "alg": "ring"}`` -> ``"m=5000,alg=ring"``, what :func:`parse_assignments` reads back to
    the same values: text that holds a comma, a quote, an equals sign, a backslash, padding or a
    control character, or that would read as a number or a boolean, is written as a JSON string, and
    so is a name that is not an identifier (a tab, a comma, an equals sign, a space in it): the line
    never holds a raw tab, so ``gptask ask``'s tab-separated columns stay three."""
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return json.dumps(v)
        if isinstance(v, str) and _needs_quotes(v):
            return json.dumps(v)
        return str(v)

    return ",".join(f"{k if _KEY.fullmatch(k) else json.dumps(k)}={text(v)}" for k, v in values.items())


def format_table(rows: Sequence[dict[str, Any]], unit: str = "", value_columns: Sequence[str] = ()) -> str:
    """A plain text table of dict rows (union of keys, in first-seen order; gains in percent; the
    unit in the headers of ``value_columns``): :func:`gptask.results.table.format_rows`."""
    from ..results.table import format_rows

    return format_rows(rows, unit, value_columns)


def max_failures_arg(text: str) -> int | str:
    """``--max-failures``: "auto" or an integer >= 0."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer >= 0, got {text!r}")
    return value


def failure_model_arg(text: str) -> bool | float:
    """``--failure-model``: "on", "off" or the least probability of success of a proposal (a
    ValueError naming the option otherwise)."""
    from ..model.surrogate.failure_model import success_threshold

    if text in ("on", "off"):
        return text == "on"
    try:
        return success_threshold(float(text))
    except ValueError:
        raise ValueError(f"--failure-model must be 'on', 'off' or a probability p with 0.5 <= p < 1, got {text!r}") \
            from None


FAILURE_MODEL_HELP = ("'on' (default): once a run failed, a model of where runs fail keeps the search where success "
                      "is likelier than not; P (0.5 <= P < 1): cautious, every proposal, initial designs included, at "
                      "least P likely to succeed (fewer failed runs, e.g. 0.7); 'off': failures count as the worst value")
