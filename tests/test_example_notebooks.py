"""The Flax notebooks in examples/ run top to bottom on trn (nbclient, a fresh IPython kernel per
notebook) and each one's own check passes: its loss curve on trn matches a CPU run of the same
cells. They are committed without outputs, so a diff of a notebook is a diff of its code."""

import os
import pathlib
import tempfile

import pytest

from fresh_process import source_tree_path

nbclient = pytest.importorskip("nbclient", reason="pip install '.[test]' (nbclient, ipykernel)")
nbformat = pytest.importorskip("nbformat")

REPO = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "examples").glob("*.ipynb"))

# An installed jax-trn registers trn through its entry point. A source tree built in place has
# none, so the kernel registers it at start-up, as tests/conftest.py does for pytest.
_STARTUP = """\
from importlib import metadata
if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()
"""


def _stdout(notebook) -> str:
  return "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                 for output in cell.outputs if output.get("name") == "stdout")


def test_examples_have_notebooks():
  assert {p.name for p in NOTEBOOKS} >= {"flax_mlp_training.ipynb", "flax_cnn_training.ipynb",
                                         "flax_lstm_gru_language_model.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
  notebook = nbformat.read(path, as_version=4)
  nbformat.validate(notebook)
  for cell in notebook.cells:
    if cell.cell_type == "code":
      assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_trains_on_trn_like_cpu(path, monkeypatch):
  notebook = nbformat.read(path, as_version=4)
  with tempfile.TemporaryDirectory(prefix="notebook-") as work:
    startup = pathlib.Path(work, "ipython", "profile_default", "startup")
    startup.mkdir(parents=True)
    (startup / "00-register-trn.py").write_text(_STARTUP)
    # The kernel inherits this environment; it starts in `work`, where the repository's jax_trn
    # is not importable by accident (only through the path below when built in place).
    monkeypatch.setenv("IPYTHONDIR", str(startup.parents[1]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        source_tree_path(str(REPO)) + [os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": work}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on a failure
  out = _stdout(notebook)
  assert "training on TRN_0" in out, out
  assert "trn loss curve matches cpu" in out, out
