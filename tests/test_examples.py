"""The examples: every notebook is made from its script (``scripts/notebooks.py``)
and runs top to bottom without error; each example asserts its own targets
(digits >= 97% test accuracy, set-encoder MSE < 0.01, a bounded 500-step
rollout, the same loss curve on every backend)."""

import pathlib
import runpy

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NOTEBOOKS = sorted(p.name for p in EXAMPLES.glob("*.ipynb"))


def _tool():
    return runpy.run_path(str(ROOT / "scripts" / "notebooks.py"))


def test_every_example_has_a_notebook_made_from_its_script():
    pytest.importorskip("nbformat", reason="notebooks need nbformat (pip install -e .[dev])")
    tool = _tool()
    scripts = [p.stem for p in tool["scripts"]()]
    assert {"quickstart", "digits_cnn", "any_backend"} <= set(scripts)
    assert sorted(f"{s}.ipynb" for s in scripts) == NOTEBOOKS
    assert tool["main"](["--check"]) == 0


def test_percent_cells_are_parsed():
    cells = _tool()["cells"]("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n\n# %%\n")
    assert cells == [("markdown", "# Title\n\ntext"), ("code", "x = 1")]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name):
    nbformat = pytest.importorskip("nbformat", reason="notebooks need nbformat")
    nbclient = pytest.importorskip("nbclient", reason="running notebooks needs nbclient")
    pytest.importorskip("ipykernel", reason="running notebooks needs ipykernel")
    pytest.importorskip("sklearn", reason="the examples need scikit-learn")
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(EXAMPLES)}})  # fmt: skip
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors
