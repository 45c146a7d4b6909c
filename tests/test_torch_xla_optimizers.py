"""PyTorch's optimizers train on trn (PJRT_DEVICE=TRN) along the same loss curve as torch on the
CPU: Adam, AdamW, RMSprop, Adagrad, SGD with momentum and torch_xla's syncfree AdamW, whose
hyper-parameters reach the plugin as float64 scalars (narrow-float64).

The default run trains a small MLP; the slow run a tiny GPT-2 and a tiny Llama built from a
config with transformers (no download). Tolerance: the loss curves agree within rtol 1e-5. The
only differences are the order of fp32 sums (TensorE K tiles, reductions: gradients agree to
~1e-7 relative) and their growth over the steps; the hyper-parameters round to the same f32 on
both sides, since torch's CPU kernels cast a Python number to the f32 tensor's dtype. Measured:
at most 4e-7 relative over 5 steps for every optimizer and model, so 1e-5 has a 25x margin and
still fails for any wrong update (a step of a mis-scaled or missing term moves the loss by 1e-3
or more).
"""

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from fresh_process import run_python

OPTIMIZERS = ("adam", "adamw", "rmsprop", "adagrad", "sgd_momentum", "syncfree_adamw")

_CHILD = textwrap.dedent("""
    import json, sys
    from importlib import metadata
    import torch, torch_xla
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
      from torch_xla.experimental import plugins
      from jax_trn.torch_plugin import TrnPlugin
      plugins.register_plugin("TRN", TrnPlugin())
    import torch.nn as nn
    import torch_xla.amp.syncfree as syncfree

    OPTIMIZERS = {
        "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
        "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2),
        "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        "syncfree_adamw": lambda p: syncfree.AdamW(p, lr=1e-2, weight_decay=0.1),
    }

    class MLP(nn.Module):
      def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))

      def forward(self, input_ids, labels):
        logits = self.net(nn.functional.one_hot(input_ids, 16).float().sum(1))
        return nn.functional.cross_entropy(logits, labels[:, 0] % 8)

    def model_of(kind):
      if kind == "mlp":
        return MLP()
      import transformers
      transformers.logging.set_verbosity_error()
      if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0, embd_pdrop=0, attn_pdrop=0))
      return transformers.LlamaForCausalLM(transformers.LlamaConfig(
          vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16))

    def loss_of(model, ids):
      if isinstance(model, MLP):
        return model(ids, ids)
      return model(input_ids=ids, labels=ids).loss

    def train(kind, name, device, steps):
      torch.manual_seed(0)
      model = model_of(kind).to(device)
      # Moving a module to an XLA device makes new Parameters, which unties tied weights
      # (GPT-2's lm_head and wte); Hugging Face's advice for XLA is to tie them again.
      if hasattr(model, "tie_weights"):
        model.tie_weights()
      opt = OPTIMIZERS[name](model.parameters())
      vocab = 16 if kind == "mlp" else 64
      ids = torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(1)).to(device)
      losses = []
      for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(model, ids)
        loss.backward()
        opt.step()
        if device != "cpu":
          torch_xla.sync()
        losses.append(loss.item())
      return losses

    kinds, steps = sys.argv[1].split(","), int(sys.argv[2])
    out = {}
    for kind in kinds:
      for name in OPTIMIZERS:
        try:
          out[f"{kind}/{name}"] = {"trn": train(kind, name, torch_xla.device(), steps),
                                   "cpu": train(kind, name, "cpu", steps)}
        except Exception as e:
          out[f"{kind}/{name}"] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out))
""")


def _train(kinds: str, steps: int, timeout: int) -> dict:
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  if kinds != "mlp" and importlib.util.find_spec("transformers") is None:
    pytest.skip("transformers is not installed (pip install '.[torch]')")
  result = run_python(f"import sys; sys.argv = ['train', {kinds!r}, '{steps}']\n" + _CHILD,
                      {"PJRT_DEVICE": "TRN"}, timeout=timeout)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mlp_curves() -> dict:
  return _train("mlp", 3, timeout=900)


@pytest.fixture(scope="module")
def transformer_curves() -> dict:
  return _train("gpt2,llama", 5, timeout=1800)


def _same_curve(case: dict) -> None:
  assert "error" not in case, case["error"]
  trn, cpu = case["trn"], case["cpu"]
  assert trn[-1] < trn[0], trn  # it trains
  np.testing.assert_allclose(trn, cpu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_trains_an_mlp_along_the_cpu_curve(mlp_curves, name):
  _same_curve(mlp_curves[f"mlp/{name}"])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_trains_a_tiny_transformer_along_the_cpu_curve(transformer_curves, kind, name):
  _same_curve(transformer_curves[f"{kind}/{name}"])
