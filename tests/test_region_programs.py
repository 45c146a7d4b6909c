"""Reductions, windows, scatters and sorts whose bodies run as region programs (gp_region_*:
lowering/gpsimd/region_program.py), against the JAX CPU backend. Bodies that are not
associative, or compute in integers or narrow floats, must match bit for bit where XLA:CPU's
order is defined (reduce, scatter, integer reduce_window): the instruction folds in that order
and rounds each step to its type."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from hlo_lowering.errors import CompileError
from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder, reader
from hlo_lowering.program.enums import REGION_CONSTANT


def _data(shape, dtype=np.float32, seed=0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, shape).astype(dtype)
  return rng.standard_normal(shape).astype(dtype)


def _exact(f, *args):
  """f on the simulator equals f on the CPU backend bit for bit."""
  program = harness.compile_fn(f, *args)
  cpu = jax.devices("cpu")[0]
  expected = jax.tree_util.tree_leaves(jax.jit(f)(*[jax.device_put(a, cpu) for a in args]))
  actual = harness.run_program(program, [np.asarray(a) for a in args])
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    e = np.asarray(e)
    assert a.dtype == e.dtype and a.shape == e.shape
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), e.reshape(-1).view(np.uint8))


def _disassembly(f, *args) -> str:
  return reader.disassemble(harness.compile_code(harness.artifact(f, *args)))


# --- reduce ---------------------------------------------------------------------------------

def test_pytree_reduce_sum_and_count():
  def sum_and_count(x):
    return lax.reduce((x, (x > 0).astype(jnp.float32)), (np.float32(0), np.float32(0)),
                      lambda a, b: (a[0] + b[0], a[1] + b[1]), (1,))
  _exact(sum_and_count, _data((4, 37, 5)))


def test_pytree_reduce_max_with_index():
  def max_with_index(x):
    index = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    def body(a, b):
      take = b[0] > a[0]
      return jnp.where(take, b[0], a[0]), jnp.where(take, b[1], a[1])
    return lax.reduce((x, index), (np.float32(-np.inf), np.int32(-1)), body, (1,))
  x = _data((6, 50))
  x[2, 7] = x[2, 9] = 100.0  # a tie keeps the first
  _exact(max_with_index, x)


@pytest.mark.parametrize("shape,dims", [((3, 7, 5), (0,)), ((3, 7, 5), (1,)),
                                        ((3, 7, 5), (0, 2)), ((3, 7, 5), (0, 1, 2)),
                                        ((2, 2000), (1,)), ((40, 3, 70), (0, 2))])
def test_non_associative_float_body_folds_in_xla_order(shape, dims):
  # Dims longer than 32 are split as XLA:CPU's tree-reduction-rewriter splits them (2000: two
  # rounds of windows), then folded sequentially.
  body = lambda a, b: a * np.float32(0.5) + b
  _exact(lambda x: lax.reduce(x, np.float32(1.0), body, dims), _data(shape))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32])
def test_integer_body_wraps_in_its_type(dtype):
  # 3·acc + x overflows the narrow types: every step wraps, as on the CPU.
  body = lambda a, b: a * dtype(3) + b
  _exact(lambda x: lax.reduce(x, dtype(1), body, (1,)), _data((4, 40), dtype))


def test_bfloat16_body_rounds_every_step():
  body = lambda a, b: jnp.maximum(a, b) * a + b
  x = (_data((5, 30)) * 0.1).astype(ml_dtypes.bfloat16)
  _exact(lambda x: lax.reduce(x, ml_dtypes.bfloat16(0.25), body, (1,)), x)


def test_runtime_init_and_compare_select_body():
  def f(x, init):
    return lax.reduce(x, init, lambda a, b: jnp.where(jnp.abs(b) > jnp.abs(a), b, a), (0,))
  _exact(f, _data((33, 4)), np.float32(0.3))


def test_ufunc_reduce_and_bool_xor():
  _exact(lambda x: jnp.logical_xor.reduce(x > 0, axis=0), _data((9, 6)))
  _exact(lambda x: jnp.bitwise_xor.reduce(x, axis=1), _data((3, 17), np.int32))


def test_reduce_region_program_is_on_gpsimd():
  text = _disassembly(lambda x: lax.reduce(x, np.float32(1), lambda a, b: a * 0.5 + b, (0,)),
                  _data((8, 3)))
  assert "gp_region_reduce" in text


# --- reduce_window --------------------------------------------------------------------------

def test_jvp_of_max_pool_is_a_variadic_reduce_window():
  def pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
  x, t = _data((2, 9, 8, 3)), _data((2, 9, 8, 3), seed=1)
  _exact(lambda x, t: jax.jvp(pool, (x,), (t,)), x, t)


def test_reduce_window_with_any_float_body():
  # A sum of squares: no single reducer, and order-insensitive up to rounding. XLA:CPU compiles
  # float reduce_window loops with FMA contraction, so float bodies match within tolerance.
  body = lambda a, b: a + b * b
  harness.check(lambda x: lax.reduce_window(x, np.float32(0), body, (3, 2), (2, 1),
                                            [(1, 1), (0, 1)]), _data((11, 6)))


# Integer bodies fold bit for bit in the emitter's row-major window order. (XLA:CPU may give a
# padded operand a column-major layout, and then folds its windows column by column: a body
# that is not commutative in its elements differs there, as it would between XLA backends.)
@pytest.mark.parametrize("window,strides,padding", [((4,), (1,), "VALID"),
                                                    ((3, 2), (2, 1), [(1, 1), (0, 0)]),
                                                    ((2, 3), (1, 2), "SAME")])
def test_integer_reduce_window_body_folds_row_major(window, strides, padding):
  body = lambda a, b: (a ^ b) * np.int32(3) + np.int32(1)
  shape = (20,) if len(window) == 1 else (9, 7)
  _exact(lambda x: lax.reduce_window(x, np.int32(5), body, window, strides, padding),
         _data(shape, np.int32))


# --- scatter --------------------------------------------------------------------------------

def test_at_apply():
  idx = np.array([0, 3, 3, 7], np.int32)
  _exact(lambda x: x.at[idx].apply(jnp.sin), _data((9,)))
  _exact(lambda x: x.at[idx].apply(lambda v: v * 3 + 1), _data((9, 2), np.int32))


def test_at_mul_and_divide_with_duplicates():
  idx = np.array([[0], [2], [2], [5], [2]], np.int32)
  _exact(lambda x, u: x.at[idx[:, 0]].mul(u), _data((6, 3)), _data((5, 3), seed=1))
  _exact(lambda x, u: x.at[idx[:, 0]].divide(u), _data((6,)), _data((5,), seed=1) + 3)


def test_segment_max_and_min():
  ids = np.array([0, 0, 1, 3, 3, 3, 5], np.int32)
  _exact(lambda x: jax.ops.segment_max(x, ids, num_segments=6), _data((7, 2)))
  _exact(lambda x: jax.ops.segment_min(x, ids, num_segments=6), _data((7,), np.int32))


def test_scatter_of_several_operands():
  # lax.scatter_apply has one operand; JAX's sort-free unique/argmax helpers do not emit a
  # variadic scatter, so this is the StableHLO form directly: (sum, product) updated together.
  text = """
func.func @main(%a: tensor<5xf32>, %b: tensor<5xi32>, %i: tensor<4x1xi32>, %u: tensor<4xf32>,
                %v: tensor<4xi32>) -> (tensor<5xf32>, tensor<5xi32>) {
  %r:2 = "stablehlo.scatter"(%a, %b, %i, %u, %v) ({
  ^bb0(%x: tensor<f32>, %y: tensor<i32>, %ux: tensor<f32>, %uy: tensor<i32>):
    %s = stablehlo.add %x, %ux : tensor<f32>
    %c = stablehlo.convert %uy : (tensor<i32>) -> tensor<f32>
    %t = stablehlo.multiply %s, %c : tensor<f32>
    %p = stablehlo.multiply %y, %uy : tensor<i32>
    stablehlo.return %t, %p : tensor<f32>, tensor<i32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
       scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<5xf32>, tensor<5xi32>, tensor<4x1xi32>, tensor<4xf32>, tensor<4xi32>)
       -> (tensor<5xf32>, tensor<5xi32>)
  return %r#0, %r#1 : tensor<5xf32>, tensor<5xi32>
}"""
  harness.native()
  a, b = _data((5,)), np.array([1, 2, 3, 4, 5], np.int32)
  i = np.array([[1], [4], [1], [9]], np.int32)  # 9: out of bounds, skipped
  u, v = _data((4,), seed=1), np.array([2, 3, -1, 7], np.int32)
  out_a, out_b = harness.run_program(harness.compile_code(text.encode()), [a, b, i, u, v])
  want_a, want_b = a.copy(), b.copy()
  for k in range(3):
    n = i[k, 0]
    want_a[n] = np.float32((want_a[n] + u[k]) * np.float32(v[k]))
    want_b[n] = want_b[n] * v[k]
  np.testing.assert_array_equal(out_a, want_a)
  np.testing.assert_array_equal(out_b, want_b)


# --- sort -----------------------------------------------------------------------------------

_SORT_BY_ABS = """
func.func @main(%x: tensor<4x9xf32>, %y: tensor<4x9xi32>) -> (tensor<4x9xf32>, tensor<4x9xi32>) {
  %r:2 = "stablehlo.sort"(%x, %y) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %aa = stablehlo.abs %a : tensor<f32>
    %ab = stablehlo.abs %b : tensor<f32>
    %lt = stablehlo.compare LT, %aa, %ab, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %aa, %ab, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %gt = stablehlo.compare GT, %c, %d, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %gt : tensor<i1>
    %before = stablehlo.or %lt, %tie : tensor<i1>
    stablehlo.return %before : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<4x9xf32>, tensor<4x9xi32>)
      -> (tensor<4x9xf32>, tensor<4x9xi32>)
  return %r#0, %r#1 : tensor<4x9xf32>, tensor<4x9xi32>
}"""


def test_sort_with_a_custom_comparator():
  # By |x| ascending, ties by the second operand descending: no comparator JAX's sort emits.
  harness.native()
  x = np.round(_data((4, 9)) * 2) / 2
  y = np.tile(np.arange(9, dtype=np.int32), (4, 1))
  out_x, out_y = harness.run_program(harness.compile_code(_SORT_BY_ABS.encode()), [x, y])
  for r in range(4):
    order = sorted(range(9), key=lambda j: (abs(x[r, j]), -y[r, j]))
    np.testing.assert_array_equal(out_x[r], x[r, order])
    np.testing.assert_array_equal(out_y[r], y[r, order])


def test_total_order_comparator_inside_a_custom_sort():
  # lax.sort's comparator over a float key negated: -x in totalorder, -0.0 before +0.0.
  text = _SORT_BY_ABS.replace("stablehlo.abs", "stablehlo.negate").replace(
      "%aa, %ab, FLOAT", "%aa, %ab, TOTALORDER")
  harness.native()
  x = np.array([[0.0, -0.0, 1.0, -1.0, 2.0, 0.0, -0.0, 3.0, -3.0]] * 4, np.float32)
  y = np.tile(np.arange(9, dtype=np.int32), (4, 1))
  out_x, out_y = harness.run_program(harness.compile_code(text.encode()), [x, y])
  keys = -x[0]
  bits = keys.view(np.int32)
  total = np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits)
  order = sorted(range(9), key=lambda j: (total[j], -y[0, j]))
  np.testing.assert_array_equal(out_x[0].view(np.uint32), x[0, order].view(np.uint32))
  np.testing.assert_array_equal(out_y[0], y[0, order])


# --- what stays refused ---------------------------------------------------------------------

def test_region_op_without_a_step_is_refused_naming_it():
  text = """
func.func @main(%x: tensor<8xf32>) -> tensor<f32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %p = stablehlo.reduce_precision %s, format = e5m10 : tensor<f32>
    stablehlo.return %p : tensor<f32>
  }
  return %r : tensor<f32>
}"""
  with pytest.raises(CompileError, match=r"stablehlo.reduce is not supported on NeuronCores: its "
                                         r"region holds stablehlo.reduce_precision"):
    harness.compile_code(text.encode())


# --- the program format: the loader's checks of region programs ------------------------------

def _region_reduce_program(region):
  b = ProgramBuilder("trn2")
  x = b.tensor("parameter", DType.F32, (2, 3), index=0, name="x")
  init = b.tensor("parameter", DType.F32, (1,), index=1, name="init")
  y = b.tensor("output", DType.F32, (2,), index=0, name="y")
  b.gp_region_reduce([HbmAP.dense(y, (2,))], [HbmAP.dense(x, (2, 3))],
                     [HbmAP(init, 0, ((0, 2),))], 1, region)
  return harness.finish(b)


# (r0:f32, r1:f32) r2 = f32 2.0; r3 = mul.f32 r0, r2; r4 = sub.f32 r3, r1 -> r4
_TWICE_MINUS = [2, 1, 3, int(DType.F32), int(DType.F32), 4,
                REGION_CONSTANT, int(DType.F32), 4611686018427387904, -1, -1,
                int(Alu.MUL), int(DType.F32), 0, 2, -1,
                int(Alu.SUB), int(DType.F32), 3, 1, -1]


def test_gp_region_reduce_runs_as_documented():
  x = np.array([[1, 2, 3], [0.5, 0.25, 4]], np.float32)
  (y,) = harness.run_program(_region_reduce_program(_TWICE_MINUS), [x, np.float32([1.0])])
  want = []
  for row in x:
    acc = np.float32(1.0)
    for v in row:
      acc = np.float32(acc * 2 - v)
    want.append(acc)
  np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("patch,message", [
    ({13: 5}, "reads register 5 before it is written"),
    ({11: int(Alu.SHIFT_LEFT)}, "shift_left needs integer data"),
    ({17: int(DType.PRED)}, "cannot write pred"),
    ({5: 9}, "result register 9"),
    ({2: 4}, "does not hold its header"),
])
def test_malformed_region_is_rejected_by_the_loader(patch, message):
  words = list(_TWICE_MINUS)
  for at, value in patch.items():
    words[at] = value
  with pytest.raises(ValueError, match=message):
    harness.run_program(_region_reduce_program(words),
                        [np.zeros((2, 3), np.float32), np.zeros(1, np.float32)])


# --- select_and_scatter ---------------------------------------------------------------------

_SELECT_AND_SCATTER = """
func.func @main(%x: tensor<7x6xf32>, %s: tensor<3x3xf32>) -> tensor<7x6xf32> {
  %init = stablehlo.constant dense<0.5> : tensor<f32>
  %r = "stablehlo.select_and_scatter"(%x, %s, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %aa = stablehlo.abs %a : tensor<f32>
    %ab = stablehlo.abs %b : tensor<f32>
    %keep = stablehlo.compare LE, %aa, %ab, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %keep : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %t = stablehlo.multiply %a, %b : tensor<f32>
    %u = stablehlo.add %t, %b : tensor<f32>
    stablehlo.return %u : tensor<f32>
  }) {window_dimensions = array<i64: 3, 2>, window_strides = array<i64: 2, 2>,
      padding = dense<[[0, 0], [0, 0]]> : tensor<2x2xi64>}
     : (tensor<7x6xf32>, tensor<3x3xf32>, tensor<f32>) -> tensor<7x6xf32>
  return %r : tensor<7x6xf32>
}"""


@pytest.mark.parametrize("padding", ["[[0, 0], [0, 0]]", "[[1, 1], [1, 1]]"])
def test_select_and_scatter_with_any_regions(padding):
  # Select the smallest |x| (the first on ties), scatter a·b + b: neither region is matched.
  harness.native()
  text = _SELECT_AND_SCATTER.replace("[[0, 0], [0, 0]]", padding)
  pad = 1 if padding.startswith("[[1") else 0
  x = _data((7, 6))
  x[0, :2] = x[1, :2]  # ties
  rows, cols = (7 + 2 * pad - 3) // 2 + 1, (6 + 2 * pad - 2) // 2 + 1
  text = text.replace("tensor<3x3xf32>", f"tensor<{rows}x{cols}xf32>")
  s = _data((rows, cols), seed=2)
  program = harness.compile_code(text.encode())
  assert "gp_region_scatter" in reader.disassemble(program)
  (out,) = harness.run_program(program, [x, s])
  want = np.full((7, 6), np.float32(0.5))
  for i in range(rows):
    for j in range(cols):
      pick = None
      for a in range(3):
        for b in range(2):
          r, c = 2 * i + a - pad, 2 * j + b - pad
          if 0 <= r < 7 and 0 <= c < 6 and (pick is None or not abs(x[pick]) <= abs(x[r, c])):
            pick = (r, c)
      if pick is not None:
        want[pick] = np.float32(np.float32(want[pick] * s[i, j]) + s[i, j])
  np.testing.assert_array_equal(out, want)


# --- JAX front ends and the timing model -----------------------------------------------------

def test_frompyfunc_ufunc_reduce():
  # a·b + a, no reducer: jnp.frompyfunc's ufunc.reduce folds it with lax.reduce.
  ufunc = jnp.frompyfunc(lambda a, b: a * b + a, nin=2, nout=1, identity=1)
  _exact(lambda x: ufunc.reduce(x, axis=1), _data((5, 12), np.int32))


def _modeled_ns(f, *args) -> float:
  _, info = harness.native().run_program(harness.compile_fn(f, *args),
                                         [np.asarray(a) for a in args])
  return info["device_time_ns"]


def test_modeled_time_grows_with_the_region_length():
  # kGpRegionCyclesPerStep: each region step is one lane-cycle per element tuple.
  x = _data((64, 20000))
  short = _modeled_ns(lambda x: lax.reduce(x, np.float32(0), lambda a, b: a * 0.5 + b, (1,)), x)
  long = _modeled_ns(lambda x: lax.reduce(
      x, np.float32(0), lambda a, b: jnp.tanh(a * 0.5 + b) * 0.25 + jnp.sin(b) - a * a, (1,)), x)
  assert long > 2 * short, (short, long)
