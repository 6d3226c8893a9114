"""Every notebook in notebooks/ runs top to bottom without error (executed in a temporary directory)."""

import shutil
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, root, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(root))
    work = tmp_path / path.name
    shutil.copy(path, work)
    nb = nbformat.read(work, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # a cell that draws a figure shows it inline, as an image output (not only a file)
    for c in nb.cells:
        if c.cell_type == "code" and ("_figure(" in c.source or "plt." in c.source):
            kinds = [k for o in c.get("outputs", []) for k in o.get("data", {})]
            assert "image/png" in kinds, (c.source[:80], kinds)


def test_notebooks_that_draw_show_their_figures_inline():
    nbformat = pytest.importorskip("nbformat")
    drawing = [p.name for p in NOTEBOOKS for c in nbformat.read(p, as_version=4).cells
               if c.cell_type == "code" and ("_figure(" in c.source or "plt." in c.source)]
    assert "01_mla_demo.ipynb" in drawing  # the check above is not vacuous


def test_notebook_01_explains_why_the_values_found_differ_from_the_optima():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    assert NOTEBOOKS[0].name == "01_mla_demo.ipynb"
    table = next(k for k, c in enumerate(nb.cells) if c.cell_type == "code" and "demo_optimum(task)" in c.source)
    assert '"regret": value - f_opt' in nb.cells[table].source
    note = nb.cells[table + 1]
    assert note.cell_type == "markdown"
    for words in ("budget", "noise", "regret = f found - f optimum", "deterministic", "local minima"):
        assert words in note.source.lower()
