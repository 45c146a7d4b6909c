"""An NKI kernel called on torch tensors on the trn XLA device (torch_xla, PJRT_DEVICE=TRN) is
a custom call in torch_xla's graph and gives torch's CPU result. Runs in a fresh process, as
tests/test_torch_xla.py does; skips without torch_xla; slow (`-m slow`)."""

import importlib.util
import json
import pathlib
import textwrap

import pytest

from fresh_process import run_python

_TESTS = pathlib.Path(__file__).resolve().parent

_CHILD = textwrap.dedent(f"""
    import json, sys
    from importlib import metadata
    import torch, torch_xla
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
      from torch_xla.experimental import plugins
      from jax_trn.torch_plugin import TrnPlugin
      plugins.register_plugin("TRN", TrnPlugin())
    sys.path.insert(0, {str(_TESTS)!r})
    import nki_tutorial_kernels as kernels
    dev = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(130, 70, generator=g), torch.randn(130, 70, generator=g)
    x = torch.randn(131, 333, generator=g)
    added = kernels.tensor_add(a.to(dev), b.to(dev)).cpu()
    soft = kernels.softmax(x.to(dev) * 2).cpu()
    print(json.dumps({{"add": float((added - (a + b)).abs().max()),
                      "softmax": float((soft - torch.softmax(x * 2, -1)).abs().max())}}))
""")


@pytest.mark.slow  # a fresh torch_xla process: ~20 s alone
def test_kernel_on_torch_xla_tensors_matches_torch():
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  result = run_python(_CHILD, {"PJRT_DEVICE": "TRN"}, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  errors = json.loads(result.stdout.strip().splitlines()[-1])
  assert errors["add"] == 0.0
  assert errors["softmax"] < 1e-6
