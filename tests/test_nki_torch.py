"""An NKI kernel called on torch tensors on the trn XLA device (torch_xla, PJRT_DEVICE=TRN) is
a custom call in torch_xla's graph and gives torch's CPU result; flash attention's
torch.autograd.Function (forward and backward kernels) gives torch autograd's CPU gradients.
Runs in a fresh process, as tests/test_torch_xla.py does; skips without torch_xla; slow
(`-m slow`)."""

import importlib.util
import json
import pathlib
import textwrap

import pytest

from fresh_process import run_python

_TESTS = pathlib.Path(__file__).resolve().parent

_REGISTER = textwrap.dedent("""
    import json, sys
    from importlib import metadata
    import torch, torch_xla
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
      from torch_xla.experimental import plugins
      from jax_trn.torch_plugin import TrnPlugin
      plugins.register_plugin("TRN", TrnPlugin())
""")

_CHILD = _REGISTER + textwrap.dedent(f"""
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


# Non-causal then causal in one process: the two kernels have the same shapes, so this also
# proves torch_xla does not hand the second call the first one's compiled graph.
_AUTOGRAD_CHILD = _REGISTER + textwrap.dedent("""
    from jax_trn.kernels.torch_autograd import flash_attention, softmax

    def reference(q, k, v, causal):
      group = q.shape[0] // k.shape[0]
      k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
      scores = q @ k.transpose(1, 2) / q.shape[-1] ** 0.5
      if causal:
        keep = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
      return torch.softmax(scores, -1) @ v

    dev = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    errors = {}
    for causal in (False, True):  # 4 query heads over 2 kv heads, 200 positions (partial tiles)
      q, k, v = (torch.randn(s, generator=g) for s in ((4, 200, 64), (2, 200, 64), (2, 200, 64)))
      w = torch.randn(4, 200, 64, generator=g)
      results = []
      for attention, device in ((flash_attention, dev), (reference, "cpu")):
        leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
        out = attention(*leaves, causal)
        (out * w.to(device)).sum().backward()
        results.append([out.detach().cpu()] + [t.grad.cpu() for t in leaves])
      errors[str(causal)] = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(*results)]
    x, w = torch.randn(130, 333, generator=g), torch.randn(130, 333, generator=g)
    results = []
    for function, device in ((softmax, dev), (lambda t: torch.softmax(t, -1), "cpu")):
      leaf = x.to(device).requires_grad_()
      y = function(leaf)
      (y * w.to(device)).sum().backward()
      results.append([y.detach().cpu(), leaf.grad.cpu()])
    errors["softmax"] = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(*results)]
    print(json.dumps(errors))
""")


def _run_child(code: str) -> dict:
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  result = run_python(code, {"PJRT_DEVICE": "TRN"}, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh torch_xla process: ~20 s alone
def test_kernel_on_torch_xla_tensors_matches_torch():
  errors = _run_child(_CHILD)
  assert errors["add"] == 0.0
  assert errors["softmax"] < 1e-6


@pytest.mark.slow  # a fresh torch_xla process: ~25 s alone
def test_autograd_functions_match_torch_autograd():
  errors = _run_child(_AUTOGRAD_CHILD)
  assert max(errors.pop("softmax")) < 1e-5  # y and dx
  for causal, (out, dq, dk, dv) in errors.items():  # relative to each result's largest value
    assert max(out, dq, dk, dv) < 1e-5, (causal, out, dq, dk, dv)
