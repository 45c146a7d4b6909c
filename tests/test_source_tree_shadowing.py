"""A checkout's unbuilt source tree shadowing the installed package (Python puts the current
directory first on sys.path): every entry point fails loudly with the fix instead of JAX quietly
running on CPU. Fresh processes start in a directory holding a copy of jax_trn's sources without
its compiled libraries; "installed" is a distribution whose jax_trn is the built one under test."""

import pathlib
import shutil

import pytest

import jax_trn
from fresh_process import run_python

BUILT = pathlib.Path(jax_trn.__file__).resolve().parent
FIX = "Run from another directory, or build the source tree in place"


def _source_tree(root: pathlib.Path) -> pathlib.Path:
  checkout = root / "checkout"
  shutil.copytree(BUILT, checkout / "jax_trn",
                  ignore=shutil.ignore_patterns("*.so", "__pycache__"))
  return checkout


def _installed(root: pathlib.Path) -> pathlib.Path:
  """A site directory with a jax-trn distribution whose package is the built one."""
  site = root / "site"
  (site / "jax_trn-0.1.0.dist-info").mkdir(parents=True)
  (site / "jax_trn").symlink_to(BUILT, target_is_directory=True)
  info = site / "jax_trn-0.1.0.dist-info"
  (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jax-trn\nVersion: 0.1.0\n")
  (info / "entry_points.txt").write_text("[jax_plugins]\ntrn = jax_trn.plugin\n")
  (info / "RECORD").write_text("".join(f"jax_trn/{p.name},,\n" for p in BUILT.glob("*.so")))
  return site


@pytest.fixture
def shadowed(tmp_path):
  if not any(BUILT.glob("_native*.so")):
    pytest.skip("jax_trn under test has no compiled extension")
  site = _installed(tmp_path)
  repo = BUILT.parent
  return _source_tree(tmp_path), {"PYTHONPATH": f"{site}:{repo}"}


def test_jax_devices_fails_with_the_fix(shadowed):
  checkout, env = shadowed
  result = run_python("import jax; print(jax.devices())", env, cwd=str(checkout))
  assert result.returncode != 0 and "CpuDevice" not in result.stdout
  assert "Unable to initialize backend 'trn'" in result.stderr
  assert "shadows the installed jax-trn in" in result.stderr and FIX in result.stderr


def test_the_package_api_fails_with_the_fix(shadowed):
  checkout, env = shadowed
  result = run_python("import jax_trn; jax_trn.configure(chips=1)", env, cwd=str(checkout))
  assert result.returncode != 0 and "RuntimeWarning" in result.stderr
  assert "ImportError: jax_trn was imported from" in result.stderr and FIX in result.stderr


def test_the_command_line_tool_fails_with_the_fix(shadowed):
  checkout, env = shadowed
  result = run_python("import sys; from jax_trn import cli; sys.exit(cli.main(['info']))", env,
                      cwd=str(checkout))
  assert result.returncode == 2 and "jax-trn: jax_trn was imported from" in result.stderr
  assert FIX in result.stderr


def test_the_torch_xla_plugin_fails_with_the_fix(shadowed):
  pytest.importorskip("torch_xla")
  checkout, env = shadowed
  result = run_python("import jax_trn.torch_plugin", env, cwd=str(checkout))
  assert result.returncode != 0 and "ImportError: jax_trn was imported from" in result.stderr
  assert FIX in result.stderr


# The test environment may have jax-trn installed (CI does): the process hides that distribution.
_NOT_INSTALLED = """
from importlib import metadata
_distribution = metadata.distribution
def distribution(name):
  if name == "jax-trn":
    raise metadata.PackageNotFoundError(name)
  return _distribution(name)
metadata.distribution = distribution
"""


def test_without_an_installed_package_the_fix_is_to_install(tmp_path):
  checkout = _source_tree(tmp_path)
  result = run_python(_NOT_INSTALLED + "import jax_trn; jax_trn.last_execution()",
                      {"PYTHONPATH": str(BUILT.parent)}, cwd=str(checkout))
  assert result.returncode != 0 and "compiled libraries are missing" in result.stderr
  assert "pip install ." in result.stderr
