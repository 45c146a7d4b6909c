"""jax-trn refuses a jaxlib other than the one it is built and tested against, saying what to do."""

from importlib import metadata

import pytest

from jax_trn import _compat


def test_the_tested_jaxlib_passes():
  assert metadata.version("jaxlib") == _compat.TESTED_JAXLIB
  _compat.check_jaxlib_version()


def test_another_jaxlib_is_refused_with_the_install_command(monkeypatch):
  monkeypatch.setattr(_compat.metadata, "version", lambda name: "0.9.0")
  with pytest.raises(ImportError, match=r"jaxlib==0\.9\.0 is installed: pip install 'jax==0\.10\.2'"):
    _compat.check_jaxlib_version()


def test_a_missing_jaxlib_is_refused(monkeypatch):
  def missing(name):
    raise metadata.PackageNotFoundError(name)
  monkeypatch.setattr(_compat.metadata, "version", missing)
  with pytest.raises(ImportError, match="jaxlib is not installed"):
    _compat.check_jaxlib_version()
