"""Writes the "process replay" corpus: tests/golden/corpus/<name>.mlir, the StableHLO of small
representative programs as JAX (and torch_xla) lower them on the CPU backend.

The corpus is an input of tests/test_golden_corpus.py, which compiles every program, runs it on
the simulator and compares disassembly, modeled cycles and output hashes with committed
snapshots. This script is only needed to add or change a program; the test reads only committed
files. Output is deterministic: rerunning it with the same jax/flax/optax/torch versions rewrites
the same bytes.

  python tests/golden/make_corpus.py            # JAX programs and the torch_xla program
  python tests/golden/make_corpus.py --no-torch # JAX programs only
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

CORPUS = pathlib.Path(__file__).parent / "corpus"


def jax_programs():
  """{name: (function, example args)}; the args only give shapes and dtypes."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  f32, bf16, i32 = jnp.float32, jnp.bfloat16, jnp.int32

  def z(shape, dtype=f32):
    return jax.ShapeDtypeStruct(shape, dtype)

  def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)

  def mlp_train_step(w1, b1, w2, b2, x, y):
    params = (w1, b1, w2, b2)
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return loss, *(p - 0.01 * g for p, g in zip(params, grads))

  def attention(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1]).astype(np.float32)
    return jax.nn.softmax(s, axis=-1) @ v

  def attention_causal(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1]).astype(np.float32)
    n = s.shape[0]
    mask = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
    s = jnp.where(mask, s, -1e9)
    return jax.nn.softmax(s, axis=-1) @ v

  def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

  def conv(x, w):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))

  def conv2d_grad(x, w):
    return jax.grad(lambda x, w: jnp.sum(jnp.tanh(conv(x, w))), argnums=(0, 1))(x, w)

  def maxpool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

  def maxpool_grad(x):
    return jax.grad(lambda x: jnp.sum(maxpool(x) ** 2))(x)

  def fori_loop(x):
    return jax.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + jnp.float32(i), x)

  def while_loop(x):
    return jax.lax.while_loop(lambda c: c[1] < 100.0, lambda c: (c[0] + 1, c[1] * 2.0 + 1.0),
                              (jnp.int32(0), jnp.sum(jnp.abs(x))))

  def cond(p, x):
    return jax.lax.cond(p[0] > 3, lambda x: jnp.sin(x) * 2.0, lambda x: x - 1.0, x)

  def switch(i, x):
    return jax.lax.switch(i[0], [lambda x: x + 1.0, lambda x: x * x, lambda x: -x], x)

  def scatter_add(x, idx, upd):
    return x.at[idx].add(upd)

  def gather_take(x, idx):
    return jnp.take(x, idx, axis=0), x[idx, 3]

  def sort(x, k):
    return jnp.sort(x, axis=-1), jnp.sort(k)

  def argsort(x):
    return jnp.argsort(x, axis=-1)

  def argmax(x):
    return jnp.argmax(x, axis=-1), jnp.argmin(x, axis=0)

  def cumsum(x, k):
    return jnp.cumsum(x, axis=1), jnp.cumsum(k), jnp.cumprod(x[:4, :8], axis=0)

  def dynamic_slice_update(x, i, u):
    s = jax.lax.dynamic_slice(x, (i[0], i[1]), (4, 8))
    return s, jax.lax.dynamic_update_slice(x, u, (i[1], i[0]))

  def shape_ops(x, y):
    t = jnp.transpose(x.reshape(4, 6, 5), (2, 0, 1))
    c = jnp.concatenate([x, y], axis=1)
    p = jnp.pad(x, ((1, 2), (0, 3)), constant_values=1.5)
    return t, c, p, x[1:7:2, ::3], jnp.flip(y, 0)

  def integer_ops(a, b):
    b = b | 1
    return (a + b * 3, a // b, a % b, a & b, a ^ b, a << 2, a >> 1, jnp.maximum(a, b),
            (a < b).astype(i32), a.astype(f32) * 0.5)

  def matmul_bf16(a, b):
    return a @ b

  def matmul_f32_odd(a, b):
    return a @ b

  def batched_matmul(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)

  def reduce_axes(x):
    return (x.sum(0), x.sum(1), x.sum(2), x.max((0, 2)), x.min(), jnp.prod(x[:2, :2], -1),
            jnp.any(x > 2.0, 1))

  def rng_normal(key):
    k = jax.random.wrap_key_data(key)
    k1, k2 = jax.random.split(k)
    return jax.random.normal(k1, (8, 16)), jax.random.uniform(k2, (130,))

  def elementwise_chain(x, y):
    a = jnp.exp(-jnp.abs(x)) * jnp.tanh(y) + jnp.log1p(x * x)
    b = jnp.where(x > y, jax.nn.sigmoid(a), jnp.sqrt(jnp.abs(a)) - 0.25)
    return jnp.clip(b * 3.0 - y / (1.0 + x * x), -2.0, 2.0)

  def softmax_xent(logits, labels):
    onehot = jax.nn.one_hot(labels, logits.shape[-1])
    return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits), -1))

  def mean_var_std(x):
    return x.mean(1), x.var(0), x.std(), jnp.linalg.norm(x, axis=1)

  def adamw_update(p, g):
    import optax
    opt = optax.adamw(1e-3, weight_decay=0.01)
    state = opt.init(p)
    updates, state = opt.update(g, state, p)
    updates, state = opt.update(g * 0.5, state, p)
    return optax.apply_updates(p, updates)

  def transformer_block(x, wq, wk, wv, wo, w1, w2, g1, g2):
    def ln(h, g):
      mu = h.mean(-1, keepdims=True)
      return (h - mu) * jax.lax.rsqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g
    h = ln(x, g1)
    heads, d = 2, x.shape[-1] // 2
    def split(t):
      return t.reshape(t.shape[0], heads, d).transpose(1, 0, 2)
    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(d))
    n = x.shape[0]
    s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -1e9)
    a = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, -1), v).transpose(1, 0, 2).reshape(n, -1)
    x = x + a @ wo
    return x + jax.nn.gelu(ln(x, g2) @ w1) @ w2

  programs = {
      "mlp_train_step": (mlp_train_step, (z((32, 64)), z((64,)), z((64, 10)), z((10,)),
                                          z((16, 32)), z((16, 10)))),
      "attention": (attention, (z((16, 32)), z((16, 32)), z((16, 32)))),
      "attention_causal": (attention_causal, (z((16, 32)), z((16, 32)), z((16, 32)))),
      "layernorm": (layernorm, (z((8, 96)), z((96,)), z((96,)))),
      "conv2d_fwd": (conv, (z((2, 3, 10, 10)), z((4, 3, 3, 3)))),
      "conv2d_grad": (conv2d_grad, (z((2, 3, 8, 8)), z((4, 3, 3, 3)))),
      "maxpool": (maxpool, (z((2, 3, 8, 8)),)),
      "maxpool_grad": (maxpool_grad, (z((2, 3, 8, 8)),)),
      "fori_loop": (fori_loop, (z((8, 20)),)),
      "while_loop": (while_loop, (z((4, 8)),)),
      "cond": (cond, (z((1,), i32), z((8, 20)))),
      "switch": (switch, (z((1,), i32), z((8, 20)))),
      "scatter_add": (scatter_add, (z((16, 8)), z((5,), i32), z((5, 8)))),
      "gather_take": (gather_take, (z((16, 8)), z((6,), i32))),
      "sort": (sort, (z((4, 33)), z((20,), i32))),
      "argsort": (argsort, (z((4, 33)),)),
      "argmax": (argmax, (z((6, 40)),)),
      "cumsum": (cumsum, (z((6, 40)), z((37,), i32))),
      "dynamic_slice_update": (dynamic_slice_update, (z((12, 16)), z((2,), i32), z((3, 5)))),
      "shape_ops": (shape_ops, (z((8, 15)), z((8, 7)))),
      "integer_ops": (integer_ops, (z((6, 20), i32), z((6, 20), i32))),
      "matmul_bf16": (matmul_bf16, (z((64, 96), bf16), z((96, 48), bf16))),
      "matmul_f32_odd": (matmul_f32_odd, (z((129, 300)), z((300, 513)))),
      "batched_matmul": (batched_matmul, (z((3, 8, 16)), z((3, 16, 12)))),
      "reduce_axes": (reduce_axes, (z((4, 6, 10)),)),
      "rng_normal": (rng_normal, (z((2,), jnp.uint32),)),
      "elementwise_chain": (elementwise_chain, (z((130, 3)), z((130, 3)))),
      "softmax_xent": (softmax_xent, (z((8, 10)), z((8,), i32))),
      "mean_var_std": (mean_var_std, (z((8, 24)),)),
      "adamw_update": (adamw_update, (z((16, 24)), z((16, 24)))),
      "transformer_block": (transformer_block, (z((8, 16)), z((16, 16)), z((16, 16)),
                                                z((16, 16)), z((16, 16)), z((16, 32)),
                                                z((32, 16)), z((16,)), z((16,)))),
  }
  programs["flax_train_step"] = flax_train_step()
  return programs


def flax_train_step():
  """A flax.linen Dense+LayerNorm+gelu model, one optax.adamw step; params flattened to args."""
  import flax.linen as nn
  import jax
  import jax.numpy as jnp
  import optax

  class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
      x = nn.gelu(nn.LayerNorm()(nn.Dense(32)(x)))
      return nn.Dense(4)(x)

  model = Model()
  x = jnp.zeros((8, 16), jnp.float32)
  params = model.init(jax.random.PRNGKey(0), x)
  opt = optax.adamw(1e-3)
  leaves, tree = jax.tree_util.tree_flatten(params)

  def step(*args):
    params = jax.tree_util.tree_unflatten(tree, args[:len(leaves)])
    x, y = args[len(leaves):]
    loss_fn = lambda p: jnp.mean((model.apply(p, x) - y) ** 2)  # noqa: E731
    loss, grads = jax.value_and_grad(loss_fn)(params)
    state = opt.init(params)
    updates, _ = opt.update(grads, state, params)
    return loss, optax.apply_updates(params, updates)

  specs = [jax.ShapeDtypeStruct(l.shape, l.dtype) for l in leaves]
  return step, (*specs, jax.ShapeDtypeStruct((8, 16), jnp.float32),
                jax.ShapeDtypeStruct((8, 4), jnp.float32))


def write_jax_programs() -> None:
  """Lowered as tests/compiler_harness.py lowers (plain jit on the CPU-only JAX this script
  runs): no device or backend argument, which would add sdy sharding annotations the plugin
  never receives."""
  import jax
  for name, (f, args) in sorted(jax_programs().items()):
    text = jax.jit(f).lower(*args).as_text()
    (CORPUS / f"{name}.mlir").write_text(text)
    print("wrote", name)


_TORCH_XLA_PROGRAM = """
import sys
import torch
import torch.nn as nn
from torch_xla.stablehlo import exported_program_to_stablehlo

class Block(nn.Module):
  def __init__(self):
    super().__init__()
    self.fc1, self.fc2 = nn.Linear(24, 48), nn.Linear(48, 10)
    self.norm = nn.LayerNorm(48)
  def forward(self, x):
    # tanh gelu: torch_xla writes exact gelu as an mhlo.erf custom call in StableHLO text.
    h = torch.nn.functional.gelu(self.norm(self.fc1(x)), approximate="tanh")
    return torch.softmax(self.fc2(h), -1)

torch.manual_seed(0)
exported = torch.export.export(Block().eval(), (torch.zeros(6, 24),))
sys.stdout.write(exported_program_to_stablehlo(exported).get_stablehlo_text("forward"))
"""


def write_torch_xla_program() -> None:
  """A small torch.nn model exported through torch_xla's StableHLO path (in its own process:
  torch_xla picks its PJRT device once per process)."""
  env = dict(os.environ, PJRT_DEVICE="CPU")
  text = subprocess.run([sys.executable, "-c", _TORCH_XLA_PROGRAM], env=env, check=True,
                        capture_output=True, text=True).stdout
  (CORPUS / "torch_xla_mlp.mlir").write_text(text)
  print("wrote torch_xla_mlp")


def main() -> None:
  os.environ["JAX_PLATFORMS"] = "cpu"
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--no-torch", action="store_true", help="skip the torch_xla program")
  args = parser.parse_args()
  CORPUS.mkdir(parents=True, exist_ok=True)
  write_jax_programs()
  if not args.no_torch:
    write_torch_xla_program()


if __name__ == "__main__":
  main()
