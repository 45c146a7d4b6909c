"""Fixtures shared by the suites that run JAX on both backends."""

from importlib import metadata

import jax
import pytest


def _register_source_tree_plugin() -> None:
  """An installed jax-trn registers through its `jax_plugins` entry point; a source tree built
  in place (cmake -DTRN_INPLACE=ON, PYTHONPATH=.) has no entry point, so register it here."""
  if not any(ep.name == "trn" for ep in metadata.entry_points(group="jax_plugins")):
    from jax_trn import plugin
    plugin.initialize()


_register_source_tree_plugin()


@pytest.fixture(scope="session")
def trn():
  """The first simulated NeuronCore."""
  return jax.devices("trn")[0]


@pytest.fixture(scope="session")
def cpu():
  """The JAX CPU backend: the reference every trn result is compared against."""
  return jax.devices("cpu")[0]
