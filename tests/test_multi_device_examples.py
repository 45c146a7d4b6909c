"""The multi-device training examples (examples/*.py) train on the simulated cores and follow the
loss trajectory of the same global step run on one CPU device."""

import pathlib
import runpy
import sys

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples"


@pytest.mark.slow
@pytest.mark.parametrize("example, steps, rtol", [
    ("pmap_data_parallel.py", 8, 1e-5),
    ("shard_map_data_parallel.py", 8, 1e-5),
    ("fsdp_tensor_parallel_transformer.py", 5, 1e-5),
])
def test_example_follows_the_cpu_loss_trajectory(example, steps, rtol, monkeypatch):
  pytest.importorskip("flax")
  pytest.importorskip("optax")
  monkeypatch.setattr(sys, "path", [str(EXAMPLES), *sys.path])  # examples import each other
  losses = runpy.run_path(str(EXAMPLES / example), run_name="example")["main"](steps)
  trn_losses, cpu_losses = zip(*losses)
  np.testing.assert_allclose(trn_losses, cpu_losses, rtol=rtol)
  assert trn_losses[-1] < trn_losses[0]
