"""Plain HTML for the campaign report: escaping, tables of dict rows, figures as data URIs, and the
page around the sections. No script, no external style sheet, font or image: the page works from
a file, offline, and in an e-mail."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.labels import GAIN_COLUMNS, format_gain

__all__ = ["esc", "table_html", "figure_html", "page_html", "note_html", "list_html", "CSS"]

#: the page's only style sheet, inline
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 1em 2em 4em; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.86em; }
th, td { border: 1px solid #d8d8d8; padding: 0.2em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; }
td.text { text-align: left; white-space: normal; }
tr.fallback td { color: #8a6d00; background: #fff8e1; }
tr.failed td { color: #a40000; }
.note { background: #f5f7fa; border-left: 4px solid #7a9cc6; padding: 0.4em 0.8em; margin: 0.6em 0; }
.missing { background: #fff4e5; border-left: 4px solid #e69500; padding: 0.4em 0.8em; margin: 0.6em 0; }
.error { background: #fdecea; border-left: 4px solid #c62828; padding: 0.4em 0.8em; margin: 0.6em 0; }
figure { margin: 0.8em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
nav ol { columns: 2; font-size: 0.92em; }
.scroll { max-height: 32em; overflow: auto; }
.wide { overflow-x: auto; }
"""


def esc(value: Any) -> str:
    """``value`` as text, HTML-escaped."""
    return html.escape(str(value), quote=True)


def _cell(key: str, v: Any) -> tuple[str, bool]:
    """(text, is_text) of one cell: gains in percent, floats to 4 significant digits, None as -."""
    if key in GAIN_COLUMNS and isinstance(v, (int, float)) and not isinstance(v, bool):
        return format_gain(float(v)), False
    if v is None:
        return "-", False
    if isinstance(v, float):
        return f"{v:.4g}", False
    if isinstance(v, (int, bool)):
        return str(v), False
    return str(v), True


def table_html(rows: Sequence[dict[str, Any]], unit: str = "", value_columns: Iterable[str] = (),
               row_class: Any = None, caption: str = "") -> str:
    """An HTML table of dict rows (the union of their keys, first-seen order); the unit in the
    headers of ``value_columns``; ``row_class(row)`` -> a CSS class or "" per row."""
    if not rows:
        return note_html("(no rows)")
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with_unit = set(value_columns) if unit else set()
    head = "".join(f"<th>{esc(f'{k} ({unit})' if k in with_unit else k)}</th>" for k in keys)
    body = []
    for r in rows:
        cls = row_class(r) if row_class else ""
        cells = []
        for k in keys:
            text, is_text = _cell(k, r.get(k))
            cells.append(f'<td class="text">{esc(text)}</td>' if is_text else f"<td>{esc(text)}</td>")
        body.append(f'<tr class="{esc(cls)}">' + "".join(cells) + "</tr>" if cls else "<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<div class="wide"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def figure_html(fig: Any, caption: str, alt: str) -> str:
    """A matplotlib Figure as an inline PNG (base64 data URI) with its caption; closes the figure."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=96)
    finally:
        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def note_html(text: str, kind: str = "note") -> str:
    """A boxed paragraph: kind "note", "missing" or "error"."""
    return f'<p class="{esc(kind)}">{esc(text)}</p>'


def list_html(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def page_html(title: str, subtitle: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole page: ``sections`` are (anchor, heading, body HTML), listed in a table of contents."""
    toc = "".join(f'<li><a href="#{esc(a)}">{esc(h)}</a></li>' for a, h, _ in sections)
    body = "".join(f'<section id="{esc(a)}"><h2>{esc(h)}</h2>{b}</section>' for a, h, b in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><link rel=\"icon\" href=\"data:,\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1><p>{esc(subtitle)}</p>"
            f"<nav><ol>{toc}</ol></nav>{body}</body></html>\n")
