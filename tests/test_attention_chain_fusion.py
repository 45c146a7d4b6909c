"""Attention's q·kᵀ inside the softmax's row fusion (passes/fuse_attention.py,
lowering/attention_rows.py), and dO·Vᵀ inside the softmax vjp's: the score rows are computed on
TensorE per block and never cross HBM. Results match the CPU backend and are bit-identical to
the program compiled without fuse-attention; what the pass does not match keeps today's path."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from hlo_lowering import importer, pipeline
from hlo_lowering.ir import walk_ops
from hlo_lowering.passes.fuse_rows import ROW_FUSION
from hlo_lowering.program import DType, disassemble, read_program
from test_attention_fusion import _BF16, _F32, _MASKS, _attention, _bits, _gradients

_DOT = "stablehlo.dot_general"


def _inputs(batch, heads, seq, dtype, head_dim=64):
  shape = (batch, heads, seq, head_dim) if batch else (heads, seq, head_dim)
  return [np.random.default_rng(i).standard_normal(shape).astype(dtype) for i in range(3)]


def _run_both(f, args):
  """(fused outputs, fused profile, fused program), the same unfused; the outputs' bits equal."""
  runs = []
  for fused in (True, False):
    program = harness.compile_without(f, args, () if fused else ("fuse-attention",), lnc=2)
    outputs, profile = harness.native().run_program(program, [np.asarray(a) for a in args])
    runs.append((outputs, profile, program))
  (fused, _, _), (unfused, _, _) = runs
  assert len(fused) == len(unfused)
  for a, b in zip(fused, unfused):
    assert _bits(a) == _bits(b)
  return runs


def _fused_matmuls(f, args) -> int:
  """Row fusions holding a matmul after the pipeline (there is at least one row fusion)."""
  module = importer.import_program(jax.jit(f).lower(*args).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  fusions = [op for op in module.main.body.ops if op.name == ROW_FUSION]
  assert fusions
  return sum(any(inner.name == _DOT for inner in walk_ops(op.regions[0].block))
             for op in fusions)


def _square_tensors(program: bytes, rows: int, seq: int) -> int:
  return sum(int(np.prod(t.shape)) == rows * seq * seq for t in read_program(program).tensors)


# (mask, batch (0: none), heads, seq, dtype): lengths not a multiple of 128 (200, 640), the
# benchmark's 2048, batch > 1.
CASES = [("causal_where", 0, 2, 384, _BF16), ("causal_where", 0, 1, 200, _F32),
         ("causal_minus_inf", 0, 2, 384, _F32), ("causal_minus_1e9", 0, 1, 640, _BF16),
         ("none", 2, 2, 256, _BF16), ("causal_where", 0, 1, 2048, _BF16)]
_IDS = [f"{m}-{b}x{h}x{s}-{np.dtype(d).name}" for m, b, h, s, d in CASES]


@pytest.mark.parametrize("mask,batch,heads,seq,dtype", CASES, ids=_IDS)
def test_forward_scores_stay_on_chip_with_the_unfused_bits(mask, batch, heads, seq, dtype):
  f, args = _attention(_MASKS[mask]), _inputs(batch, heads, seq, dtype)
  if seq <= 640:
    harness.check(f, *args, scale=8)
  (_, fused, program), (_, unfused, unfused_program) = _run_both(f, args)
  rows = max(batch, 1) * heads
  # Unfused, the scores and the probabilities cross HBM; fused, only the probabilities.
  assert _square_tensors(unfused_program, rows, seq) == 2
  assert _square_tensors(program, rows, seq) == 1
  assert fused["hbm_bytes"] < unfused["hbm_bytes"]


@pytest.mark.parametrize("mask,batch,heads,seq,dtype", CASES[:5], ids=_IDS[:5])
def test_gradients_keep_the_unfused_bits(mask, batch, heads, seq, dtype):
  f, args = _gradients(_MASKS[mask]), _inputs(batch, heads, seq, dtype)
  harness.check(f, *args, scale=16)
  (_, fused, _), (_, unfused, _) = _run_both(f, args)
  assert fused["hbm_bytes"] < unfused["hbm_bytes"]


def test_the_forward_and_the_vjp_each_take_their_matmul():
  """In the transformer block's shape (the cotangent arrives after the forward), q·kᵀ joins the
  softmax and dO·Vᵀ the softmax vjp."""
  def loss(q, k, v, w):
    return jnp.sum((_attention(_MASKS["causal_where"])(q, k, v) @ w).astype(jnp.float32) ** 2)
  args = _inputs(0, 2, 256, _BF16) + [np.ones((64, 64), _BF16)]
  assert _fused_matmuls(jax.grad(loss, argnums=(0, 1, 2)), args) == 2


def test_probabilities_returned_too_keep_the_unfused_bits():
  f, args = _attention(_MASKS["causal_where"], return_probabilities=True), _inputs(0, 2, 384,
                                                                                   _BF16)
  harness.check(f, *args, scale=8)
  _run_both(f, args)
  assert _fused_matmuls(f, args) == 1


def test_scores_also_returned_keep_the_matmul_outside():
  def f(q, k, v):
    scores = q @ jnp.swapaxes(k, -1, -2)
    return jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(v.dtype) @ v, scores
  args = _inputs(0, 2, 256, _BF16)
  assert _fused_matmuls(f, args) == 0
  harness.check(f, *args, scale=8)


def test_a_contraction_beyond_one_tile_keeps_the_matmul_outside():
  f, args = _attention(_MASKS["causal_where"]), _inputs(0, 1, 256, _BF16, head_dim=192)
  assert _fused_matmuls(f, args) == 0
  harness.check(f, *args, scale=8)


def test_rows_longer_than_four_psum_banks_keep_the_matmul_outside():
  f, args = _attention(_MASKS["none"]), _inputs(0, 1, 2304, _BF16)
  assert _fused_matmuls(f, args) == 0


def test_the_whole_softmax_vjp_is_one_row_fusion_at_seq_2048():
  """In the transformer block's shape at seq 2048, the vjp's rows (dP, dP / sum, the score
  gradient and its mask) need more tiles than a block holds side by side; fuse-rows counts the
  tiles live at once and the lowering reuses those of rows already read, so the vjp is one row
  fusion with dO·Vᵀ inside: no fp32 row but the forward's exponentials crosses HBM, and the
  bits stay those of the unfused program."""
  def loss(q, k, v, w):
    return jnp.sum((_attention(_MASKS["causal_where"])(q, k, v) @ w).astype(jnp.float32) ** 2)
  f = jax.grad(loss, argnums=(0, 1, 2))
  args = _inputs(0, 1, 2048, _BF16) + [np.ones((64, 64), _BF16)]
  (_, fused, program), _ = _run_both(f, args)
  assert _fused_matmuls(f, args) == 2
  fp32_rows = [t for t in read_program(program).tensors
               if int(np.prod(t.shape)) == 2048 * 2048 and t.dtype == DType.F32]
  assert len(fp32_rows) == 1


def test_the_vjp_reads_dp_in_psum_with_the_unfused_bits():
  """dO·Vᵀ's rows, read by the vjp's scalar_tensor_tensor (and its divide), stay in the PSUM
  banks they were summed in, rounded to bf16 in place: that VectorE pass takes N cycles, not
  2N. Rows holding NaN, ±inf and -0 keep the bits of the program that loads dP from HBM;
  without them (and with w the identity) the gradients match the CPU backend."""
  def loss(q, k, v, w):
    return jnp.sum((_attention(_MASKS["causal_where"])(q, k, v) @ w).astype(jnp.float32) ** 2)
  f = jax.grad(loss, argnums=(0, 1, 2))
  q, k, v = _inputs(0, 2, 384, _BF16)
  q[1, 7, :] = -0.0
  k[1, 30, 2] = np.nan
  v[0, 3, 1] = np.nan
  v[1, 60, 1] = -np.inf
  w = np.random.default_rng(5).standard_normal((64, 64)).astype(_BF16)
  # (A random w makes some bf16 gradients cancellation-sensitive: every compile of ours, fused
  # or not, and XLA's CPU backend then part beyond the bf16 tolerance; the identity does not.)
  harness.check(f, *_inputs(0, 2, 384, _BF16), np.eye(64, dtype=_BF16), scale=16)
  (_, _, program), _ = _run_both(f, [q, k, v, w])
  text = disassemble(program)
  assert re.search(r"scalar_tensor_tensor .*data=PSUM\S*:bf16\[1x384\]", text)
  assert re.search(r"activation .*dst=PSUM\S*:bf16\[1x\d+\] src=PSUM", text)


def _biased_attention(q, k, v, bias):
  """Scores plus a causal tanh bias: the scores' row (in PSUM) is read by the bias add only
  after GpSimd's compare, ScalarE's tanh and VectorE's select, three engine changes after
  q·kᵀ."""
  s = (q @ jnp.swapaxes(k, -1, -2)) / np.float32(8)
  i = jax.lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 2)
  j = jax.lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 1)
  return jax.nn.softmax(s + jnp.where(i >= j, jnp.tanh(bias), -jnp.inf), axis=-1) @ v


@pytest.mark.parametrize("seq", [512, 2048])
def test_scores_read_stages_after_their_matmul_keep_the_unfused_bits(seq):
  """A block's scores stay in PSUM until their last reader, which comes stages after q·kᵀ;
  block b + sets takes the same banks, so the pipeline holds more PSUM sets (512 columns: one
  bank a block) or merges stages (2048: four banks, two sets) until that read comes first.
  (Before, the later block's sums replaced the scores: silently wrong probabilities.)"""
  args = _inputs(0, 2, seq, _F32) + [
      np.random.default_rng(3).standard_normal((2, seq, seq)).astype(_F32)]
  if seq <= 512:
    harness.check(_biased_attention, *args, scale=8)
  for lnc in (1, 2):
    program = harness.compile_without(_biased_attention, args, (), lnc=lnc)
    unfused = harness.compile_without(_biased_attention, args, ("fuse-attention",), lnc=lnc)
    fused_out, unfused_out = (harness.native().run_program(p, args)[0]
                              for p in (program, unfused))
    assert _bits(fused_out[0]) == _bits(unfused_out[0])
  assert _fused_matmuls(_biased_attention, args) == 1
