"""fuse-rows and the trn.row_fusion lowering: softmax, layernorm, RMSnorm and their gradients
become one pass over whole rows in SBUF; outputs match the JAX CPU backend, are bit-identical to
the program without the pass, move each tensor across HBM once, and fall back to the unfused
lowering where the pattern does not hold."""

import collections
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import importer, pipeline
from hlo_lowering.passes.fuse_rows import ROW_FUSION
from hlo_lowering.program import disassemble
from jax_trn import compilation


def _data(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _layer_norm(x, g, b):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def _rms_norm(x, g):
  return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g


def _softmax(x):
  return jax.nn.softmax(x, axis=-1)


def _softmax_grad(x):
  return jax.grad(lambda x: jnp.sum(jax.nn.softmax(x, axis=-1) ** 2))(x)


def _layer_norm_grad(x, g, b):
  return jax.grad(lambda x, g, b: jnp.sum(_layer_norm(x, g, b) ** 2), argnums=(0, 1, 2))(x, g, b)


def _centered_sums(x):
  """A reduce without keepdims, its statistic read back through a reshape and returned too."""
  s = jnp.sum(x, axis=-1)
  return x - s[:, None] / x.shape[-1], s


def _norm_over_last_two(x):
  """Rows of two reduced dims ([4, 5, 6, 7] reduced over 6 × 7)."""
  m = x.mean(axis=(2, 3), keepdims=True)
  return (x - m) / (jnp.abs(x).max(axis=(2, 3), keepdims=True) + 1.0)


def _masked_softmax(x):
  return jax.nn.softmax(jnp.where(x > -0.5, x, -1e9), axis=-1)


def _causal_softmax(x):
  """The mask is iota-derived (computed on chip by the elementwise rule): its cluster stays out
  of the row fusion, which reads the masked scores."""
  t = x.shape[-1]
  return jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((t, t), bool)), x, -1e9), axis=-1)


def _select_and_clamp_by_stats(x):
  """select and clamp read a statistic over the rows (a stride-0 view, not a scalar operand)."""
  high = jnp.where(x > x.mean(-1, keepdims=True), x.max(-1, keepdims=True), x)
  return jnp.clip(high, x.min(-1, keepdims=True) * 0.5, x.max(-1, keepdims=True) * 0.5)


def _integer_rows(x):
  a = (x * 20).astype(jnp.int32)
  return a - a.max(-1, keepdims=True) + a.sum(-1, keepdims=True)


def _statistic_returned_over_rows(x):
  return jax.nn.log_softmax(x, axis=-1), jnp.broadcast_to(x.sum(-1, keepdims=True), x.shape)


_F32, _BF16 = np.float32, ml_dtypes.bfloat16

# (name, f, shapes, dtype, CPU tolerance scale): rows not a multiple of 128, short and long
# rows (4096 fp32 elements: a whole 16 KiB slot), bf16 and fp32, keepdims and not.
CASES = [
    ("softmax", _softmax, [(300, 200)], _F32, 4),
    ("softmax", _softmax, [(7, 3, 130)], _BF16, 4),
    ("softmax", _softmax, [(129, 4096)], _F32, 4),
    ("softmax", _softmax, [(5, 17)], _BF16, 4),
    ("layer_norm", _layer_norm, [(33, 130), (130,), (130,)], _F32, 30),
    ("layer_norm", _layer_norm, [(200, 1024), (1024,), (1024,)], _BF16, 30),
    ("rms_norm", _rms_norm, [(130, 257), (257,)], _F32, 30),
    ("rms_norm", _rms_norm, [(257, 64), (64,)], _BF16, 30),
    ("softmax_grad", _softmax_grad, [(129, 96)], _F32, 30),
    ("layer_norm_grad", _layer_norm_grad, [(70, 160), (160,), (160,)], _F32, 100),
    ("centered_sums", _centered_sums, [(150, 33)], _F32, 10),
    ("norm_over_last_two", _norm_over_last_two, [(4, 5, 6, 7)], _F32, 10),
    ("masked_softmax", _masked_softmax, [(130, 70)], _F32, 4),
    ("causal_softmax", _causal_softmax, [(3, 130, 130)], _F32, 4),
    ("select_and_clamp_by_stats", _select_and_clamp_by_stats, [(130, 70)], _BF16, 4),
    ("integer_rows", _integer_rows, [(130, 70)], _F32, 1),
    ("statistic_returned_over_rows", _statistic_returned_over_rows, [(130, 70)], _F32, 10),
]


def _args(shapes, dtype):
  return [_data(s, dtype, i) for i, s in enumerate(shapes)]


def _summary():
  return compilation.last_report().summary()


@pytest.mark.parametrize("name,f,shapes,dtype,scale", CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[2][0]))}-{np.dtype(c[3]).name}"
                              for c in CASES])
def test_row_fusions_match_cpu(name, f, shapes, dtype, scale):
  harness.check(f, *_args(shapes, dtype), scale=scale)
  assert ROW_FUSION in _summary(), name


def _run(f, args, fused=True):
  program = harness.compile_without(f, args, () if fused else ("fuse-rows",))
  summary = _summary()
  outputs, profile = harness.native().run_program(program, [np.array(a) for a in args])
  return outputs, profile, summary


def _bits_equal(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return a.dtype == b.dtype and np.array_equal(a.reshape(-1).view(np.uint8),
                                               b.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("name,f,shapes,dtype,scale", CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[2][0]))}-{np.dtype(c[3]).name}"
                              for c in CASES])
def test_row_fusions_are_bit_identical_to_unfused(name, f, shapes, dtype, scale):
  harness.native()
  args = _args(shapes, dtype)
  fused, _, fused_summary = _run(f, args)
  unfused, _, unfused_summary = _run(f, args, fused=False)
  assert ROW_FUSION in fused_summary and ROW_FUSION not in unfused_summary
  assert len(fused) == len(unfused)
  for a, b in zip(fused, unfused):
    assert _bits_equal(a, b), name


@pytest.mark.parametrize("f,shape", [
    (lambda x: jax.nn.softmax(x, axis=0), (64, 48)),         # rows along the strided axis
    (_softmax, (16, 5000)),                                   # 20 KB fp32 rows: over a slot
    (lambda x: x - jnp.sum(x, axis=(0, 1)), (6, 40)),        # a full reduction: no kept rows
])
def test_other_reductions_keep_the_unfused_lowering(f, shape):
  harness.check(f, _data(shape, np.float32, 0), scale=4)
  summary = _summary()
  assert ROW_FUSION not in summary and "stablehlo.reduce" in summary


def test_softmax_is_one_row_fusion_in_the_ir():
  text = jax.jit(_softmax).lower(_data((300, 200), np.float32, 0)).as_text()
  module = importer.import_program(text.encode(), "mlir")
  upto = [p for p in pipeline.PASSES[:[p.name for p in pipeline.PASSES].index("fuse-rows") + 1]]
  pipeline.run_pipeline(module, passes=tuple(upto))
  names = [op.name for op in module.main.body.ops]
  assert names.count(ROW_FUSION) == 1 and "stablehlo.reduce" not in names
  (fused,) = [op for op in module.main.body.ops if op.name == ROW_FUSION]
  assert fused.attrs["row_shape"] == [300, 200] and fused.attrs["reduced_dims"] == 1
  inner = [op.name for op in fused.regions[0].block.ops]
  assert inner.count("stablehlo.reduce") == 2 and "stablehlo.divide" in inner


def test_each_tensor_crosses_hbm_once_and_time_drops():
  harness.native()
  args = _args([(1024, 512), (512,), (512,)], np.float32)
  _, fused, _ = _run(_layer_norm, args)
  _, unfused, _ = _run(_layer_norm, args, fused=False)
  # x in, the result out, and the scale and offset rows once, broadcast to 128 partitions.
  necessary = 2 * args[0].nbytes + 128 * (args[1].nbytes + args[2].nbytes)
  assert fused["hbm_bytes"] <= necessary < unfused["hbm_bytes"]
  # Both are VectorE-bound once the unfused path reads statistics as per-partition scalars, so
  # the saving in time is the HBM round trips only.
  assert fused["device_time_ns"] < unfused["device_time_ns"]


def test_program_size_does_not_grow_with_rows():
  counts = []
  for rows in (4096, 32768):
    harness.compile_fn(_softmax, _data((rows, 256), np.float32, 0))
    counts.append(sum(compilation.last_report().instructions_per_stream.values()))
  assert counts[1] == counts[0], counts


def test_an_op_written_twice_is_computed_once():
  """JAX's layernorm computes `x - mean` for the variance and again for the result."""
  text = disassemble(harness.compile_fn(_layer_norm, *_args([(33, 130), (130,), (130,)], _F32)))
  subtracts = [line for line in text.splitlines()  # over the rows (not a [p, 1] negation)
               if "# stablehlo.subtract" in line and "dst=SBUF[0:33]" in line and "x130]" in line]
  assert len(subtracts) == 1, subtracts


@pytest.mark.parametrize("dtype,folded", [(_F32, True), (_BF16, False)])
def test_softmax_exp_reads_the_row_minus_max_on_scalar_engine(dtype, folded):
  """fp32 exp(x - max) is one ScalarE activation with the negated max as its per-partition bias
  (the same fp32 sum); in bf16 the difference rounds to bf16 first, so it stays on VectorE."""
  text = disassemble(harness.compile_fn(_softmax, _data((100, 64), dtype, 0)))
  exps = [line for line in text.splitlines() if "func=exp" in line]
  subtracts = [line for line in text.splitlines() if "# stablehlo.subtract" in line]
  assert len(exps) == 1 and ("bias=SBUF" in exps[0]) == folded
  assert (not subtracts) == folded


@pytest.mark.parametrize("eps,folded", [(1e-5, True), (0.0, False)])
def test_rsqrt_of_variance_plus_eps_is_one_scalar_engine_activation(eps, folded):
  """fp32 rsqrt(var + eps) is ScalarE's rsqrt with eps as its immediate bias (the same fp32
  sum), bit-identical to the unfused program; + 0.0 is not folded (ScalarE skips a +0 bias, so
  −0 would stay −0 where VectorE's add gives +0)."""
  def norm(x):
    var = jnp.mean(jnp.square(x - jnp.mean(x, -1, keepdims=True)), -1, keepdims=True)
    return x * jax.lax.rsqrt(var + eps)
  args = _args([(130, 96)], _F32)
  text = disassemble(harness.compile_fn(norm, *args))
  rsqrts = [line for line in text.splitlines() if "func=rsqrt" in line]
  adds = [line for line in text.splitlines() if "# stablehlo.add" in line]
  assert rsqrts and all(("bias=f32(9.99" in line) == folded for line in rsqrts), rsqrts
  assert (not adds) == folded, adds
  fused, _, _ = _run(norm, args)
  unfused, _, _ = _run(norm, args, fused=False)
  assert all(_bits_equal(a, b) for a, b in zip(fused, unfused))


def test_bf16_means_reduce_the_bf16_rows():
  """JAX's mean of bf16 converts the rows to fp32 for the reduce: the sum widens its source
  into the fp32 partial itself (tensor_reduce, or ScalarE's exact copy to fp32 with its row
  sum), so it reads the bf16 tile and the convert's pass goes."""
  text = disassemble(harness.compile_fn(_layer_norm, *_args([(33, 130), (130,), (130,)], _BF16)))
  sums = [line for line in text.splitlines()
          if "dst_sum=SBUF" in line or line.split()[1:2] == ["tensor_reduce"]]
  # The mean's sum reads the bf16 rows; the variance's is ScalarE's, of the bf16 squares it wrote.
  mean, variance = ([line for line in sums if "func=square" not in line],
                    [line for line in sums if "func=square" in line])
  assert len(mean) == 1 and re.search(r"src=\S+:bf16\[", mean[0]), mean
  assert len(variance) == 1 and re.search(r"dst=\S+:bf16\[", variance[0]), variance
  assert "# stablehlo.convert" not in " ".join(l for l in text.splitlines() if "f32[1x130]" in l)


def _lines(text, opcode):
  return [line for line in text.splitlines() if line.split()[1:2] == [opcode]]


def test_softmax_sums_its_exp_in_the_same_scalar_engine_pass():
  """exp(x - max) and its row sum are one activation_reduce: no VectorE add-reduce is left."""
  text = disassemble(harness.compile_fn(_softmax, _data((300, 200), _F32, 0)))
  exps = _lines(text, "activation_reduce")
  assert len(exps) == 3 and all("func=exp" in line and "dst_sum=SBUF" in line for line in exps)
  assert all("op=max" in line for line in _lines(text, "tensor_reduce"))


def test_norms_share_their_row_passes_between_vector_and_scalar_engines():
  """fp32 layer norm: ScalarE sums the rows (a copy with its row sum), centres them, squares
  and sums them in one pass; VectorE scales the centred rows by rstd and by g in one
  scalar_tensor_tensor and adds the offset. No tensor_reduce is left."""
  text = disassemble(harness.compile_fn(_layer_norm, *_args([(128, 512), (512,), (512,)], _F32)))
  scalar = [line.split("#")[0] for line in text.splitlines() if line.split()[1:2] in
            (["activation"], ["activation_reduce"])]
  assert any("func=square" in line and "dst_sum=SBUF" in line for line in scalar), scalar
  assert any("func=copy" in line and "dst_sum=SBUF" in line for line in scalar), scalar
  assert not _lines(text, "tensor_reduce")
  (fused,) = _lines(text, "scalar_tensor_tensor")
  assert "op0=34 op1=34" in fused and "# stablehlo.multiply" in fused  # (d · rstd) · g
  assert all(" op=add" in line for line in _lines(text, "tensor_tensor"))


def test_divide_by_reciprocal_is_an_explicit_opt_in(monkeypatch):
  """Default: softmax divides (XLA's bits). TRN_ROW_DIVIDE_BY_RECIPROCAL=1: one reciprocal of
  the row sum per block and a multiply, within the documented tolerance of the CPU."""
  x = _data((300, 200), _F32, 0)
  default = disassemble(harness.compile_fn(_softmax, x))
  assert any("op=div" in line for line in _lines(default, "tensor_scalar"))
  monkeypatch.setenv("TRN_ROW_DIVIDE_BY_RECIPROCAL", "1")
  text = disassemble(harness.compile_fn(_softmax, x))
  assert not any("op=div" in line for line in text.splitlines())
  assert len([line for line in _lines(text, "tensor_unary") if "op=reciprocal" in line]) == 3
  harness.check(_softmax, x, scale=4)


def test_pipelined_blocks_interleave_and_keep_their_debug_entries():
  """The blocks of a fusion whose ops change engine are emitted software-pipelined: ScalarE's
  stream starts block 2's mean sum before block 1's rsqrt, VectorE's block 2's mean before
  block 1's last pass, and every instruction keeps its own op's debug entry however the blocks
  interleave."""
  text = disassemble(harness.compile_fn(_layer_norm, *_args([(512, 256), (256,), (256,)], _F32)))
  act = [line for line in text.splitlines() if line.split()[1:2] in
         (["activation"], ["activation_reduce"])]
  mean_sums = [i for i, line in enumerate(act) if "# stablehlo.reduce" in line]
  rsqrts = [i for i, line in enumerate(act) if "func=rsqrt" in line]
  assert mean_sums[1] < rsqrts[0]
  dve = [line for line in text.splitlines() if line.split()[1:2] in
         (["tensor_tensor"], ["tensor_scalar"], ["tensor_unary"], ["scalar_tensor_tensor"])]
  means = [i for i, line in enumerate(dve) if "# stablehlo.divide" in line]
  last_passes = [i for i, line in enumerate(dve) if "# stablehlo.add" in line and "x256]" in line]
  assert means[2] < last_passes[0]
  # Each of the 4 blocks runs the same ops: every (instruction, op) carries each label 4k times.
  labels = collections.Counter()
  for line in text.splitlines():
    parts = line.split()
    if len(parts) > 2 and parts[0].isdigit() and parts[1] != "dma_copy":
      kind = [p for p in parts if p.startswith(("op=", "func="))][:1]
      labels[(parts[1], *kind, line.split("# ")[1].split()[0])] += 1
  assert all(n % 4 == 0 for n in labels.values()), labels
