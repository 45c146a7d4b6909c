"""Fixtures shared by the suites that run JAX on both backends."""

import jax
import pytest


@pytest.fixture(scope="session")
def trn():
  """The first simulated NeuronCore."""
  return jax.devices("trn")[0]


@pytest.fixture(scope="session")
def cpu():
  """The JAX CPU backend: the reference every trn result is compared against."""
  return jax.devices("cpu")[0]
