"""fuse-elementwise and the trn.fusion lowering: clustering on IR, whole programs against the JAX
CPU backend, bit-identical results with and without the pass, and the modeled device time of
optimizer updates and a training step."""

import re
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

import compiler_harness as harness
from hlo_lowering import importer, ir_printer, verifier
from hlo_lowering.passes import fuse_elementwise
from hlo_lowering.program import disassemble
from jax_trn import compilation


def _fuse(text):
  module = importer.import_program(textwrap.dedent(text).encode(), "mlir")
  fuse_elementwise.run(module)
  verifier.verify_module(module, "fuse-elementwise")
  return module


def _ops(module):
  return [op.name for op in module.main.body.ops]


def _inner(op):
  return [o.name for o in op.regions[0].block.ops]


def test_chain_becomes_one_fusion():
  module = _fuse("""
  func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.add %x, %y : tensor<4x8xf32> loc("jit(f)/add"("f.py":1:1))
    %1 = stablehlo.exponential %0 : tensor<4x8xf32> loc("jit(f)/exp"("f.py":2:1))
    %2 = stablehlo.multiply %1, %z : tensor<4x8xf32> loc("jit(f)/mul"("f.py":3:1))
    return %2 : tensor<4x8xf32>
  }""")
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<4x8xf32>, %1: tensor<4x8xf32>, %2: tensor<4x8xf32>):
          %3 = trn.fusion(%0, %1, %2) {fused_ops = 3} : tensor<4x8xf32>  // jit(f)/mul at f.py:3:1
            ^(%4: tensor<4x8xf32>, %5: tensor<4x8xf32>, %6: tensor<4x8xf32>):
              %7 = stablehlo.add(%4, %5) : tensor<4x8xf32>  // jit(f)/add at f.py:1:1
              %8 = stablehlo.exponential(%7) : tensor<4x8xf32>  // jit(f)/exp at f.py:2:1
              %9 = stablehlo.multiply(%8, %6) : tensor<4x8xf32>  // jit(f)/mul at f.py:3:1
              stablehlo.return(%9)  // jit(f)/mul at f.py:3:1
          func.return(%3)
      """)


def test_diamond_and_escaping_values():
  module = _fuse("""
  func.func @main(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
    %a = stablehlo.add %x, %y : tensor<16xf32>
    %b = stablehlo.exponential %a : tensor<16xf32>
    %c = stablehlo.log %a : tensor<16xf32>
    %d = stablehlo.multiply %b, %c : tensor<16xf32>
    %t = stablehlo.transpose %b, dims = [0] : (tensor<16xf32>) -> tensor<16xf32>
    return %d, %t : tensor<16xf32>, tensor<16xf32>
  }""")
  fusion, transpose, _ = module.main.body.ops
  assert fusion.name == "trn.fusion" and transpose.name == "stablehlo.transpose"
  assert _inner(fusion) == ["stablehlo.add", "stablehlo.exponential", "stablehlo.log",
                            "stablehlo.multiply", "stablehlo.return"]
  # %b escapes to the transpose, %d to the return: both are results, in program order.
  assert len(fusion.results) == 2
  assert transpose.operands == [fusion.results[0]]
  assert module.main.returned == [fusion.results[1], transpose.result]


def test_broadcasts_and_splats_join_the_cluster():
  module = _fuse("""
  func.func @main(%x: tensor<4x8xf32>, %s: tensor<8xf32>) -> tensor<4x8xf32> {
    %c = stablehlo.constant dense<2.0> : tensor<f32>
    %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
    %0 = stablehlo.multiply %x, %cb : tensor<4x8xf32>
    %1 = stablehlo.add %0, %sb : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }""")
  (fusion, _) = module.main.body.ops
  assert set(fusion.operands) == set(module.main.args)
  assert _inner(fusion) == ["stablehlo.constant", "stablehlo.broadcast_in_dim",
                            "stablehlo.broadcast_in_dim", "stablehlo.multiply", "stablehlo.add",
                            "stablehlo.return"]


def test_no_cycle_through_a_reduce():
  """Layer-norm shape: x - mean(x) needs the reduce of x's producer, so the producer and the
  subtract cannot be one cluster (the reduce would both follow and feed it)."""
  module = _fuse("""
  func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %a = stablehlo.add %x, %y : tensor<4x8xf32>
    %b = stablehlo.multiply %a, %a : tensor<4x8xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%b init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
    %c = stablehlo.subtract %a, %rb : tensor<4x8xf32>
    %d = stablehlo.exponential %c : tensor<4x8xf32>
    return %d : tensor<4x8xf32>
  }""")
  ops = module.main.body.ops
  assert _ops(module) == ["trn.fusion", "stablehlo.constant", "stablehlo.reduce",
                          "trn.fusion", "func.return"]
  first, second = ops[0], ops[3]
  assert _inner(first) == ["stablehlo.add", "stablehlo.multiply", "stablehlo.return"]
  assert len(first.results) == 2  # %a feeds the second cluster, %b the reduce
  assert _inner(second) == ["stablehlo.broadcast_in_dim", "stablehlo.subtract",
                            "stablehlo.exponential", "stablehlo.return"]


def test_cut_by_other_ops_shapes_and_single_ops():
  module = _fuse("""
  func.func @main(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %a = stablehlo.negate %x : tensor<4x8xf32>
    %b = stablehlo.abs %a : tensor<4x8xf32>
    %t = stablehlo.transpose %b, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %c = stablehlo.add %t, %y : tensor<8x4xf32>
    %s = stablehlo.reshape %c : (tensor<8x4xf32>) -> tensor<32xf32>
    %d = stablehlo.sqrt %s : tensor<32xf32>
    %e = stablehlo.reshape %d : (tensor<32xf32>) -> tensor<8x4xf32>
    return %e : tensor<8x4xf32>
  }""")
  # add and sqrt are each alone in their iteration space: left as they are.
  assert _ops(module) == ["trn.fusion", "stablehlo.transpose", "stablehlo.add",
                          "stablehlo.reshape", "stablehlo.sqrt", "stablehlo.reshape",
                          "func.return"]


def test_outside_user_moves_after_the_fusion():
  """%a's outside user (a reduce) sits between cluster members; it moves after the fusion."""
  module = _fuse("""
  func.func @main(%x: tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>) {
    %a = stablehlo.exponential %x : tensor<8xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %b = stablehlo.log %a : tensor<8xf32>
    return %r, %b : tensor<f32>, tensor<8xf32>
  }""")
  assert _ops(module) == ["stablehlo.constant", "trn.fusion", "stablehlo.reduce", "func.return"]


def test_cluster_size_is_capped():
  lines = ["%v0 = stablehlo.add %x, %x : tensor<64xf32>"]
  lines += [f"%v{i} = stablehlo.multiply %v{i - 1}, %x : tensor<64xf32>" for i in range(1, 120)]
  module = _fuse(f"""
  func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {{
    {chr(10).join(lines)}
    return %v119 : tensor<64xf32>
  }}""")
  fusions = module.main.body.ops[:-1]
  assert all(op.name == "trn.fusion" for op in fusions) and len(fusions) == 3
  assert sum(op.attrs["fused_ops"] for op in fusions) == 120
  assert all(op.attrs["fused_ops"] + 1 <= fuse_elementwise.MAX_TILE_VALUES for op in fusions)


# --- programs against the JAX CPU backend -----------------------------------------------------

def _data(shape, dtype, seed):
  rng = np.random.default_rng(seed)
  return rng.standard_normal(shape).astype(dtype)


def _adamw_update(shapes, dtype=np.float32):
  tx = optax.adamw(1e-3, weight_decay=1e-2)
  params = {f"p{i}": _data(s, dtype, i) for i, s in enumerate(shapes)}
  grads = {k: _data(v.shape, dtype, 100 + i) for i, (k, v) in enumerate(params.items())}
  with jax.default_device(jax.devices("cpu")[0]):
    state = jax.tree_util.tree_map(np.asarray, tx.init(params))
  state = jax.tree_util.tree_map(
      lambda a: a + np.abs(_data(a.shape, a.dtype, 7)) if a.dtype.kind == "f" else a + 3, state)

  def update(g, s, p):
    u, s = tx.update(g, s, p)
    return optax.apply_updates(p, u), s
  return update, (grads, state, params)


ADAM_SHAPES = [(256, 300), (300,), (130, 129), (3, 5, 7), (1,)]


def test_adamw_update_matches_cpu():
  f, args = _adamw_update(ADAM_SHAPES)
  harness.check(f, *args, scale=4)
  summary = compilation.last_report().summary()
  assert summary["trn.fusion"]["native"] >= len(ADAM_SHAPES)
  assert "gpsimd" not in summary.get("stablehlo.multiply", {})


def _layer_norm(x, g, b):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


@pytest.mark.parametrize("name,f,shapes,scale", [
    ("layer_norm", _layer_norm, [(33, 130), (130,), (130,)], 30),
    ("gelu_tanh", lambda x: jax.nn.gelu(x, approximate=True), [(129, 257)], 50),
    ("gelu_erf", lambda x: jax.nn.gelu(x, approximate=False), [(1000,)], 50),
    ("softmax", lambda x: jax.nn.softmax(x, axis=-1), [(70, 300)], 50),
    ("logsumexp_pieces", lambda x, y: jnp.exp(x - y.max()) * 0.5 + jnp.tanh(y) ** 2,
     [(64, 65), (64, 65)], 50),
])
def test_programs_match_cpu(name, f, shapes, scale):
  args = [_data(s, np.float32, i) for i, s in enumerate(shapes)]
  harness.check(f, *args, scale=scale)
  assert "trn.fusion" in compilation.last_report().summary(), name


def test_bf16_and_integer_mixes_match_cpu():
  def f(x, y, n, k):
    h = (x.astype(jnp.float32) * 2.0 + y).astype(jnp.bfloat16)     # convert in the chain
    m = jnp.where(n > 3, n * 3 - k, (n ^ k) >> 1)                   # int32 ops, compare, select
    c = jnp.clip(x, -0.5, 0.5) * h                                  # clamp with splat bounds
    return h * x, m, (m.astype(jnp.float32) + y).astype(jnp.bfloat16), c
  x = _data((130, 70), ml_dtypes.bfloat16, 1)
  y = _data((130, 70), np.float32, 2)
  rng = np.random.default_rng(3)
  n, k = (rng.integers(-50, 50, (130, 70)).astype(np.int32) for _ in range(2))
  harness.check(f, x, y, n, k)
  assert "trn.fusion" in compilation.last_report().summary()


# --- bit-identical to the unfused program, and the modeled time -------------------------------

# The pipeline without fusion: fuse-rows (which also takes elementwise ops) goes too.
_UNFUSED = ("fuse-elementwise", "fuse-rows")


def _run(f, args, fused=True):
  leaves = [np.array(a) for a in jax.tree_util.tree_leaves(args)]
  program = harness.compile_without(f, args, () if fused else _UNFUSED)
  outputs, profile = harness.native().run_program(program, leaves)
  return outputs, profile, program


def _bits_equal(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return a.dtype == b.dtype and np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("case", ["adamw", "layer_norm", "mixed"])
def test_fused_results_are_bit_identical_to_unfused(case):
  if case == "adamw":
    f, args = _adamw_update(ADAM_SHAPES[:3])
  elif case == "layer_norm":
    f, args = _layer_norm, [_data(s, np.float32, i) for i, s in enumerate([(40, 300), (300,),
                                                                             (300,)])]
  else:
    f = lambda x, y: (jax.nn.gelu(x.astype(jnp.float32) * y).astype(jnp.bfloat16) + x,
                      jnp.where(y > 0, jnp.exp(y), jnp.expm1(y)))
    args = [_data((257, 33), ml_dtypes.bfloat16, 1), _data((257, 33), np.float32, 2)]
  harness.native()
  fused, _, _ = _run(f, args)
  assert "trn.fusion" in compilation.last_report().summary()
  unfused, _, _ = _run(f, args, fused=False)
  assert "trn.fusion" not in compilation.last_report().summary()
  assert len(fused) == len(unfused)
  for a, b in zip(fused, unfused):
    assert _bits_equal(a, b)


def test_report_and_debug_table_name_the_original_ops():
  f = lambda x, y: jnp.tanh(x) * y + 1.0
  args = [_data((300,), np.float32, 1), _data((300,), np.float32, 2)]
  program = harness.compile_fn(f, *args)  # with debug info: JAX names and source lines
  report = compilation.last_report()
  summary = report.summary()
  assert summary["trn.fusion"] == {"native": 1}
  for op in ("stablehlo.tanh", "stablehlo.multiply", "stablehlo.add"):
    assert summary[op] == {"native": 1}
  assert re.search(r"trn\.fusion: native 1 \(\d+ ops\)", report.format())
  text = disassemble(program)
  assert re.search(r"activation .*# stablehlo.tanh jit\(<lambda>\)/tanh \S+test_pass_fusion.py",
                   text)
  assert re.search(r"tensor_tensor .*# stablehlo.multiply ", text)


def _flax_mlp_step():
  from flax import linen as nn

  class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
      x = nn.gelu(nn.Dense(256)(x))
      x = nn.LayerNorm()(x)
      return nn.Dense(2)(x)

  model, tx = MLP(), optax.adam(3e-3)
  with jax.default_device(jax.devices("cpu")[0]):
    params = model.init(jax.random.key(0), jnp.ones((1, 2)))
    opt_state = tx.init(params)

  def train_step(params, opt_state, x, y):
    def loss_fn(p):
      return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  rng = np.random.default_rng(0)
  x = rng.standard_normal((256, 2)).astype(np.float32)
  y = rng.integers(0, 2, 256).astype(np.int32)
  return train_step, (params, opt_state, x, y)


# The fused time as a fraction of the unfused, at most. Unfused, AdamW is an elementwise chain
# bound by DMA: fusion removes its intermediate HBM round trips, and the fused loop is then
# VectorE-bound (its two divides), which caps the gain near 0.63. The Flax MLP step works on tiny
# matrices: about half its time is VectorE's per-instruction overhead (docs/timing-model.md,
# instruction_fixed_cycles), which fusion does not remove.
_FUSED_TIME_BOUND = {"adamw update": 0.7, "flax_mlp train_step": 0.8}


@pytest.mark.parametrize("case", ["adamw update",
                                  pytest.param("flax_mlp train_step", marks=pytest.mark.slow)])
def test_modeled_device_time_drops(case):
  f, args = _adamw_update([(256, 300), (300,)]) if case == "adamw update" else _flax_mlp_step()
  harness.native()
  fused, fused_profile, _ = _run(f, args)
  unfused, unfused_profile, _ = _run(f, args, fused=False)
  before, after = unfused_profile["device_time_ns"], fused_profile["device_time_ns"]
  print(f"{case}: modeled device time {before / 1e3:.1f} us unfused, {after / 1e3:.1f} us fused")
  assert after < _FUSED_TIME_BOUND[case] * before
  for a, b in zip(fused, unfused):
    assert _bits_equal(a, b)
