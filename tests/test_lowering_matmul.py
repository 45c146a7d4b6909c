"""The native TensorE dot_general lowering (hlo_lowering/lowering/matmul.py) against the JAX CPU
backend: sizes around the 128-partition and 512-column tile edges in every dimension, batch dims,
contracting dims in any position, f32/bf16/f16 (and fp8) operands; plus a timing sanity check of
the modeled device time against TensorE's fp32 peak."""

import math
import random

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering.program import Memory, read_program
from jax_trn import compilation

SIZES = [1, 127, 128, 129, 200, 300, 513]
FLOATS = [np.float32, ml_dtypes.bfloat16, np.float16]


def _data(shape, dtype, seed):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(-20, 20, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def _check_native(f, *args, contraction: int):
  """Compares with CPU within the error bound of a `contraction`-term fp32 sum (either backend may
  sum in any order) and checks that every dot_general ran on TensorE."""
  harness.check(f, *args, bounds=sum_of_products_bounds(f, *args, terms=contraction))
  assert compilation.last_report().summary()["stablehlo.dot_general"] == {"native": 1}


def _sizes(count):
  """A deterministic sample of (M, K, N) from SIZES³, plus each size once in every position."""
  everything = [(m, k, n) for m in SIZES for k in SIZES for n in SIZES]
  sample = random.Random(0).sample(everything, count)
  return sample + [(s, 129, 130) for s in SIZES] + [(130, s, 129) for s in SIZES] + [
      (129, 130, s) for s in SIZES]


@pytest.mark.parametrize("m,k,n", _sizes(10))
def test_matmul_sizes_f32(m, k, n):
  _check_native(lambda a, b: a @ b, _data((m, k), np.float32, 1), _data((k, n), np.float32, 2),
                contraction=k)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,k,n", [(129, 300, 513), (1, 200, 127), (300, 1, 128)])
def test_matmul_dtypes(dtype, m, k, n):
  _check_native(lambda a, b: a @ b, _data((m, k), dtype, 1), _data((k, n), dtype, 2),
                contraction=k)


def test_bf16_inputs_f32_result():
  a, b = _data((200, 300), ml_dtypes.bfloat16, 1), _data((300, 129), ml_dtypes.bfloat16, 2)
  _check_native(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32), a, b,
                contraction=300)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_fp8_inputs(dtype):
  a, b = (_data(s, np.float32, i) * 0.5 for i, s in enumerate([(130, 129), (129, 40)]))
  _check_native(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32),
                a.astype(dtype), b.astype(dtype), contraction=129)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_fp8_lhs_transposed_in_pairs(dtype):
  """K a multiple of 256: the fp8 lhs is transposed as bf16 pairs (even and odd k of each 256
  K elements in their own K tile); a partial last m-tile and two N panels' worth of columns."""
  a, b = (_data(s, np.float32, i) * 0.5 for i, s in enumerate([(1100, 512), (512, 3300)]))
  _check_native(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32),
                a.astype(dtype), b.astype(dtype), contraction=512)


def test_a_contraction_too_long_for_a_resident_panel():
  """K = 20000 f32: the streaming buffers of a full-K row alone outgrow SBUF, so the key-cached
  schedule with K in chunks runs (lowering/matmul.py)."""
  a, b = _data((130, 20000), np.float32, 0), _data((20000, 40), np.float32, 1)
  _check_native(lambda a, b: a @ b, a, b, contraction=20000)


def test_fp8_pair_transposes_move_every_byte_pair_exactly():
  """x @ I with every fp8 e4m3 byte pair in x but NaN (a pair is one bf16 element through
  TensorE and PSUM: no pattern, subnormal or not, may change)."""
  k = 512
  raw = np.random.default_rng(3).integers(0, 256, (1100, k)).astype(np.uint8)
  raw[(raw & 0x7F) == 0x7F] = 0x11
  x = raw.view(ml_dtypes.float8_e4m3fn)
  eye = np.eye(k, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
  f = lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32)
  out, = harness.run_program(harness.compile_fn(f, x, eye), [x, eye])
  np.testing.assert_array_equal(out, x.astype(np.float32))


@pytest.mark.parametrize("name,spec,lhs,rhs", [
    ("x @ w.T", "mk,nk->mn", (129, 200), (130, 200)),
    ("w.T @ x", "km,kn->mn", (300, 129), (300, 513)),
    ("batched", "bmk,bkn->bmn", (3, 129, 130), (3, 130, 127)),
    ("batch last", "mkb,knb->bmn", (40, 129, 2), (129, 30, 2)),
    ("3-D x @ w", "bsk,kn->bsn", (2, 100, 129), (129, 200)),
    ("contract two dims", "mab,abn->mn", (70, 3, 50), (3, 50, 129)),
    ("vector @ matrix", "k,kn->n", (300,), (300, 513)),
    ("matrix @ vector", "mk,k->m", (513, 300), (300,)),
    ("dot product", "k,k->", (513,), (513,)),
])
def test_dot_general_forms(name, spec, lhs, rhs):
  contracted = [c for c in spec.split(",")[0] if c in spec.split(",")[1].split("->")[0]
                and c not in spec.split("->")[1]]
  k = math.prod(lhs[spec.split(",")[0].index(c)] for c in contracted)
  _check_native(lambda a, b: jnp.einsum(spec, a, b), _data(lhs, np.float32, 1),
                _data(rhs, np.float32, 2), contraction=k)


def test_empty_contraction_is_zero():
  _check_native(lambda a, b: a @ b, _data((5, 0), np.float32, 1), _data((0, 7), np.float32, 2),
                contraction=1)


def test_integer_dot_stays_on_gpsimd():
  harness.check(lambda a, b: a @ b, _data((30, 17), np.int32, 1), _data((17, 9), np.int32, 2))
  assert compilation.last_report().summary()["stablehlo.dot_general"] == {"gpsimd": 1}


def test_matmul_1024_reaches_tensor_engine_peak_within_3x():
  """1024³ fp32 in canonical form (no reshapes around it): modeled device time vs one core's
  fp32 TensorE peak, 2·128·128·clock/4 FLOP/ns."""
  size = 1024
  a, b = _data((1, size, size), np.float32, 1), _data((1, size, size), np.float32, 2)
  dims = (((2,), (1,)), ((0,), (0,)))
  f = lambda a, b: jax.lax.dot_general(a, b, dims)
  program = harness.compile_fn(f, a, b)
  outputs, profile = harness.native().run_program(program, [a, b])
  np.testing.assert_allclose(outputs[0], np.matmul(a, b), rtol=1e-4, atol=1e-3)
  spec = harness.native().target_spec("trn2")
  peak = 2 * 128 * 128 * spec["tensor_clock_ghz"] / 4
  flops = 2 * size**3
  assert profile["matmul_flops"] == flops
  utilization = flops / peak / profile["device_time_ns"]
  print(f"1024^3 fp32 matmul: {profile['device_time_ns'] / 1e3:.1f} us, "
        f"{utilization:.0%} of TensorE fp32 peak")
  assert utilization > 1 / 3


@pytest.mark.parametrize("name,f,lhs,rhs", [
    ("x @ w.T", lambda x, w: x @ w.T, (129, 300), (513, 300)),
    ("x.T @ w", lambda x, w: x.T @ w, (300, 129), (300, 513)),
    ("x.T @ w.T", lambda x, w: x.T @ w.T, (300, 129), (130, 300)),
    ("bmk,bnk->bmn", lambda x, w: jnp.einsum("bmk,bnk->bmn", x, w), (3, 140, 200), (3, 70, 200)),
    ("transpose then reshape", lambda x, w: x @ w.transpose(1, 2, 0).reshape(130, 6),
     (129, 130), (6, 5, 26)),
])
def test_transposed_operands_are_views(name, f, lhs, rhs):
  """A transpose feeding only dot_generals is a strided view: no GpSimd copy, no instruction."""
  x, w = _data(lhs, np.float32, 1), _data(rhs, np.float32, 2)
  _check_native(f, x, w, contraction=300)
  report = compilation.last_report()
  assert report.gpsimd_ops() == [], name
  assert set(report.summary()["stablehlo.transpose"]) == {"native"}


def test_transpose_with_a_dense_consumer_is_copied():
  """w.T also feeds an add (which wants dense data): the transpose stays a real copy."""
  x, w = _data((129, 64), np.float32, 1), _data((200, 64), np.float32, 2)
  def f(x, w):
    wt = w.T
    return x @ wt, wt + 1.0

  harness.check(f, x, w, scale=8)
  assert compilation.last_report().summary()["stablehlo.transpose"] == {"gpsimd": 1}


def _slice_instructions() -> list[int]:
  return [e.instructions for e in compilation.last_report().ops if e.op == "stablehlo.slice"]


def test_slices_read_by_matmuls_are_views():
  """jnp.split(x @ w, 3)'s parts, split into heads and multiplied (attention's q, k, v): each
  slice is a strided view of the product, with no instruction; a part an add also reads is
  copied."""
  x, w = _data((256, 96), np.float32, 1), _data((96, 3 * 128), np.float32, 2)

  def f(x, w):
    q, k, v = (a.reshape(256, 2, 64).transpose(1, 0, 2) for a in jnp.split(x @ w, 3, axis=-1))
    return jnp.einsum("hqd,hkd->hqk", q, k) @ v

  harness.check(f, x, w, bounds=sum_of_products_bounds(f, x, w, terms=96 * 64 * 256))
  assert _slice_instructions() == [0, 0, 0]

  def g(x, w):
    q, k = jnp.split(x @ w[:, :256], 2, axis=-1)
    return q.T @ k, q + 1.0

  harness.check(g, x, w, bounds=sum_of_products_bounds(g, x, w, terms=96 * 256))
  # w[:, :256] and k are views, q is copied.
  assert sorted(n > 0 for n in _slice_instructions()) == [False, False, True]

  harness.check(lambda x, w: x[:, ::2] @ w[:48], x, w, scale=8)
  assert [n > 0 for n in _slice_instructions()] == [True, False]  # stepped: copied


def _profile(f, *args):
  program = harness.compile_fn(f, *args)
  _, profile = harness.native().run_program(program, list(args))
  return profile


def _instructions(profile) -> int:
  return sum(stream["instructions"] for stream in profile["streams"].values())


def test_x_times_w_transposed_costs_about_as_much_as_x_times_w():
  x, w = _data((512, 1024), np.float32, 1), _data((1024, 1024), np.float32, 2)
  transposed = _profile(lambda x, w: x @ w.T, x, w)["device_time_ns"]
  plain = _profile(lambda x, w: x @ w, x, w)["device_time_ns"]
  print(f"x @ w.T: {transposed / 1e3:.1f} us, x @ w: {plain / 1e3:.1f} us")
  assert transposed < 1.5 * plain


def test_2d_matmul_writes_its_output_in_place():
  """a @ b is a [1,M,K] x [1,K,N] batch matmul reshaped to [M,N]: the matmul stores into the
  output tensor, so the program is the canonical 3-D one (no extra HBM copy)."""
  a, b = _data((256, 512), np.float32, 1), _data((512, 256), np.float32, 2)
  _check_native(lambda a, b: a @ b, a, b, contraction=512)
  two_d = _profile(lambda a, b: a @ b, a, b)
  dims = (((2,), (1,)), ((0,), (0,)))
  three_d = _profile(lambda a, b: jax.lax.dot_general(a, b, dims), a[None], b[None])
  assert _instructions(two_d) == _instructions(three_d)
  assert two_d["device_time_ns"] == pytest.approx(three_d["device_time_ns"], rel=0.02)


def test_value_returned_directly_and_through_a_reshape():
  a, b = _data((40, 50), np.float32, 1), _data((50, 60), np.float32, 2)
  harness.check(lambda a, b: (a @ b, (a @ b).reshape(-1), (a @ b).reshape(60, 40)), a, b,
                scale=8)


def test_psum_evictions_alternate_between_vector_and_scalar_engines():
  """The resident-rhs schedule evicts its PSUM banks on VectorE and ScalarE in turn: the output
  tiles of a [512, 256] x [256, 1024] matmul (4 m-tiles x 2 n-blocks) are half `activation`
  copies (the fp32 PSUM sources; the lhs transposes' PSUM tiles are bf16)."""
  a, b = _data((512, 256), ml_dtypes.bfloat16, 1), _data((256, 1024), ml_dtypes.bfloat16, 2)
  _check_native(lambda a, b: a @ b, a, b, contraction=256)
  program = read_program(harness.compile_fn(lambda a, b: a @ b, a, b))
  from_psum = {"ACTIVATION": 0, "TENSOR_COPY": 0}
  for block in program.blocks:
    for inst in block.instructions:
      if inst.opcode.name in from_psum and inst.operands["src"].memory == Memory.PSUM:
        from_psum[inst.opcode.name] += inst.operands["src"].dtype.name == "F32"
  assert from_psum == {"ACTIVATION": 4, "TENSOR_COPY": 4}


def test_transposes_are_copied_out_of_psum_by_vector_and_scalar_engines_exactly():
  """The lhs of x @ I (bf16 [512, 512]: 4 m-tiles of 4 K tiles, one bank of transposes each) is
  transposed on TensorE, and every other bank of transposes is copied to SBUF by ScalarE's fp32
  `activation` instead of VectorE: every finite bf16 bit pattern (subnormals too) still reaches
  the product unchanged."""
  k = 512
  bits = np.random.default_rng(4).integers(0, 1 << 16, (512, k)).astype(np.uint16)
  bits[(bits & 0x7F80) == 0x7F80] = 0x1234  # no Inf or NaN: x·0 must stay 0
  x = bits.view(ml_dtypes.bfloat16)
  eye = np.eye(k, dtype=np.float32).astype(ml_dtypes.bfloat16)
  f = lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32)
  program = harness.compile_fn(f, x, eye)
  out, = harness.run_program(program, [x, eye])
  np.testing.assert_array_equal(out, x.astype(np.float32))
  copies = {"ACTIVATION": 0, "TENSOR_COPY": 0}
  for block in read_program(program).blocks:
    for inst in block.instructions:
      if inst.opcode.name in copies and inst.operands["src"].memory == Memory.PSUM:
        copies[inst.opcode.name] += inst.operands["src"].dtype.name == "BF16"
  assert copies["ACTIVATION"] == copies["TENSOR_COPY"] > 0, copies
