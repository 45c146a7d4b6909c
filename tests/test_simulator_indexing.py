"""gp_gather, gp_scatter, gp_arg_reduce and gp_sort built by hand, run on the simulator and
checked against numpy; their timing; and the loader rejecting malformed forms of each."""

import numpy as np
import pytest

from hlo_lowering.program import Alu, DType, HbmAP, ProgramBuilder, Scalar, Stream
from hlo_lowering.program.enums import SCATTER_CLAMP, SORT_FLOAT_CANONICAL
from compiler_harness import finish

_native = pytest.importorskip("jax_trn._native")


def _gather_program(src_shape, window, index_dtype=DType.S32, rows=3):
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, src_shape, index=0, name="x")
  idx = b.tensor("parameter", index_dtype, (rows, len(src_shape)), index=1, name="idx")
  y = b.tensor("output", DType.F32, (rows,) + window, index=0, name="y")
  b.gp_gather(HbmAP.dense(y, (rows,) + window), HbmAP.dense(x, src_shape),
              HbmAP.dense(idx, (rows, len(src_shape))))
  return b


def _run(b, *inputs):
  outputs, profile = _native.run_program(finish(b), list(inputs))
  return outputs, profile


def _expected_windows(x, starts, window, clamp=True):
  out = []
  for row in starts:
    lo = [min(max(int(s), 0), d - w) for s, d, w in zip(row, x.shape, window)]
    out.append(x[tuple(slice(l, l + w) for l, w in zip(lo, window))])
  return np.stack(out)


def test_gather_clamps_every_start():
  x = np.arange(6 * 7, dtype=np.float32).reshape(6, 7)
  starts = np.array([[0, 0], [5, 6], [-4, 100]], np.int32)
  (y,), profile = _run(_gather_program((6, 7), (2, 3)), x, starts)
  np.testing.assert_array_equal(y, _expected_windows(x, starts, (2, 3)))
  # "dynamic-address copy max(600, N)" cycles at least.
  assert profile["streams"]["POOL"]["busy_ns"] >= 600 / 1.4


def test_gather_unsigned_indices_past_int64():
  x = np.arange(10, dtype=np.float32)
  starts = np.array([[2], [2**64 - 1], [9]], np.uint64)
  (y,), _ = _run(_gather_program((10,), (4,), DType.U64), x, starts)
  np.testing.assert_array_equal(y, np.stack([x[2:6], x[6:10], x[6:10]]))


@pytest.mark.parametrize("op,clamp", [(Alu.COPY, False), (Alu.ADD, False), (Alu.MAX, True),
                                      (Alu.MUL, False)])
def test_scatter_windows_in_order(op, clamp):
  dst0 = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
  updates = np.random.default_rng(1).standard_normal((4, 2, 4)).astype(np.float32)
  starts = np.array([[1, 0], [1, 0], [4, 0], [-1, 0]], np.int64)
  b = ProgramBuilder()
  base = b.tensor("parameter", DType.F32, (5, 4), index=0, name="base")
  upd = b.tensor("parameter", DType.F32, (4, 2, 4), index=1, name="upd")
  idx = b.tensor("parameter", DType.S64, (4, 2), index=2, name="idx")
  y = b.tensor("output", DType.F32, (5, 4), index=0, name="y")
  b.gp_copy(HbmAP.dense(y, (5, 4)), HbmAP.dense(base, (5, 4)))
  b.gp_scatter(op, HbmAP.dense(y, (5, 4)), HbmAP.dense(upd, (4, 2, 4)), HbmAP.dense(idx, (4, 2)),
               SCATTER_CLAMP if clamp else 0)
  (out,), _ = _run(b, dst0, updates, starts)
  expected = dst0.copy()
  combine = {Alu.COPY: lambda a, u: u, Alu.ADD: np.add, Alu.MAX: np.maximum,
             Alu.MUL: np.multiply}[op]
  for row, (s, _) in zip(updates, starts):
    if not 0 <= s <= 3:
      if not clamp:
        continue
      s = min(max(s, 0), 3)
    expected[s:s + 2] = combine(expected[s:s + 2], row)
  np.testing.assert_array_equal(out, expected)


def test_arg_reduce_and_sort():
  x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, -0.0, 2.0, 0.0]], np.float32)
  b = ProgramBuilder()
  xt = b.tensor("parameter", DType.F32, (2, 4), index=0, name="x")
  iota = b.tensor("temporary", DType.S32, (2, 4), name="iota")
  value = b.tensor("output", DType.F32, (2,), index=0, name="value")
  index = b.tensor("output", DType.S32, (2,), index=1, name="index")
  keys = b.tensor("output", DType.F32, (2, 4), index=2, name="keys")
  order = b.tensor("output", DType.S32, (2, 4), index=3, name="order")
  b.gp_iota(HbmAP.dense(iota, (2, 4)), 1)
  b.gp_arg_reduce(Alu.MAX, HbmAP.dense(value, (2,)), HbmAP.dense(index, (2,)),
                  HbmAP.dense(xt, (2, 4)), HbmAP.dense(iota, (2, 4)), 1,
                  Scalar(DType.F32, float("-inf")), Scalar(DType.S32, 0))
  b.gp_sort([HbmAP.dense(keys, (2, 4)), HbmAP.dense(order, (2, 4))],
            [HbmAP.dense(xt, (2, 4)), HbmAP.dense(iota, (2, 4))], num_keys=1,
            descending=True, float_order=SORT_FLOAT_CANONICAL)
  (v, i, k, o), _ = _run(b, x)
  np.testing.assert_array_equal(i, [1, 0])
  assert np.isnan(v[0]) and v[1] == 2.0
  np.testing.assert_array_equal(o, [[1, 3, 2, 0], [0, 2, 1, 3]])


@pytest.mark.parametrize("op, expected_index, expected_value", [
    (Alu.MAX, [2, 0, 3], [3.0, 0.0, -1.0]), (Alu.MIN, [3, 0, 3], [2.0, 0.0, -1.0])])
def test_arg_reduce_select_body(op, expected_index, expected_value):
  """body 1 (XLA's select form): a NaN is never kept; ties keep the accumulator's value and take
  the smaller index."""
  x = np.array([[1.0, np.nan, 3.0, 2.0], [0.0, -0.0, 0.0, -0.0], [np.nan, np.nan, np.nan, -1.0]],
               np.float32)  # JAX's body would answer NaN, and -0.0 (the last tie's value)
  b = ProgramBuilder()
  xt = b.tensor("parameter", DType.F32, (3, 4), index=0, name="x")
  iota = b.tensor("temporary", DType.S32, (3, 4), name="iota")
  value = b.tensor("output", DType.F32, (3,), index=0, name="value")
  index = b.tensor("output", DType.S32, (3,), index=1, name="index")
  b.gp_iota(HbmAP.dense(iota, (3, 4)), 1)
  b.gp_arg_reduce(op, HbmAP.dense(value, (3,)), HbmAP.dense(index, (3,)),
                  HbmAP.dense(xt, (3, 4)), HbmAP.dense(iota, (3, 4)), 1,
                  Scalar(DType.F32, float("-inf") if op == Alu.MAX else float("inf")),
                  Scalar(DType.S32, 0), body=1)
  (v, i), _ = _run(b, x)
  np.testing.assert_array_equal(i, expected_index)
  np.testing.assert_array_equal(v.view(np.int32), np.array(expected_value, np.float32).view(np.int32))


def _expect_invalid(b, message, *inputs):
  with pytest.raises(ValueError, match=message):
    _native.run_program(finish(b), list(inputs))


def _force(b, **fields):
  """Replaces operands of the last POOL instruction (forms a lowering rule would not emit)."""
  b.streams[Stream.POOL][-1].operands.update(fields)
  return b


def test_loader_rejects_malformed_gather_and_scatter():
  x, idx = np.zeros((6, 7), np.float32), np.zeros((3, 2), np.int32)
  b = _gather_program((6, 7), (2, 3))
  _expect_invalid(_force(b, indices=HbmAP.dense(0, (3, 2))), "indices must be an integer", x, idx)
  b = _gather_program((6, 7), (2, 3))
  _expect_invalid(_force(b, indices=HbmAP.dense(1, (2, 3))), r"do not fit a 2-D base", x, idx)
  b = _gather_program((6, 7), (2, 3))
  _expect_invalid(_force(b, src=HbmAP.dense(0, (6, 1))), r"exceeds the base", x, idx)
  b = _gather_program((6, 7), (2, 3))
  _expect_invalid(_force(b, dst=HbmAP.dense(0, (3, 2, 3))), "writes parameter", x, idx)
  b = _gather_program((6, 7), (2, 3))
  _expect_invalid(_force(b, indices=HbmAP.dense(1, (3, 3))), "covers elements", x, idx)
  b = _gather_program((6, 7), (2, 3))
  b.gp_scatter(Alu.ADD, HbmAP.dense(2, (3, 2, 3)), HbmAP.dense(0, (1, 2, 2, 3)),
               HbmAP.dense(1, (1, 3)), 0)
  _force(b, op=Alu.SUB)
  _expect_invalid(b, "not a scatter combiner", x, idx)
  b = _gather_program((6, 7), (2, 3))
  b.gp_scatter(Alu.ADD, HbmAP.dense(2, (3, 2, 3)), HbmAP.dense(0, (1, 2, 2, 3)),
               HbmAP.dense(1, (1, 3)), 0)
  _expect_invalid(_force(b, bounds=2), "scatter bounds mode 2", x, idx)


def test_loader_rejects_malformed_sort_and_arg_reduce():
  x = np.zeros((2, 4), np.float32)

  def program():
    b = ProgramBuilder()
    b.tensor("parameter", DType.F32, (2, 4), index=0, name="x")
    b.tensor("output", DType.F32, (2, 4), index=0, name="y")
    b.tensor("output", DType.S32, (2,), index=1, name="i")
    b.tensor("temporary", DType.S32, (2, 4), name="iota")
    return b

  b = program()
  b.gp_sort([HbmAP.dense(1, (2, 4))], [HbmAP.dense(0, (2, 4))])
  _expect_invalid(_force(b, num_keys=2), "key count 2 with 1 operands", x)
  b = program()
  b.gp_sort([HbmAP.dense(1, (2, 4))], [HbmAP.dense(0, (2, 4))])
  _expect_invalid(_force(b, srcs=[HbmAP.dense(0, (4, 2))]), "dims other than", x)
  b = program()
  b.gp_sort([HbmAP.dense(1, (2, 4))], [HbmAP.dense(0, (2, 4))])
  _expect_invalid(_force(b, dsts=[HbmAP.dense(3, (2, 4))]), "dtype differs", x)
  b = program()
  b.gp_sort([HbmAP.dense(1, (2, 4))], [HbmAP.dense(0, (2, 4))])
  _expect_invalid(_force(b, descending=3), "sort direction 3", x)
  b = program()
  b.gp_arg_reduce(Alu.MAX, HbmAP.dense(3, (2,)), HbmAP.dense(2, (2,)), HbmAP.dense(0, (2, 4)),
                  HbmAP.dense(3, (2, 4)), 1, Scalar(DType.F32, 0.0), Scalar(DType.S32, 0))
  _expect_invalid(_force(b, op=Alu.ADD), "not an arg-reduction", x)
  b = program()
  b.gp_arg_reduce(Alu.MAX, HbmAP.dense(3, (2,)), HbmAP.dense(2, (2,)), HbmAP.dense(0, (2, 4)),
                  HbmAP.dense(3, (2, 4)), 1, Scalar(DType.F32, 0.0), Scalar(DType.S32, 0))
  _expect_invalid(_force(b, src_index=HbmAP.dense(1, (2, 4))), "index operand must be an integer",
                  x)
  b = program()
  b.gp_arg_reduce(Alu.MAX, HbmAP.dense(3, (2,)), HbmAP.dense(2, (2,)), HbmAP.dense(0, (2, 4)),
                  HbmAP.dense(3, (2, 4)), 1, Scalar(DType.F32, 0.0), Scalar(DType.S32, 0))
  _expect_invalid(_force(b, reduced=0), "element counts differ", x)


def test_loader_rejects_float_indices():
  b = ProgramBuilder()
  x = b.tensor("parameter", DType.F32, (6, 7), index=0, name="x")
  idx = b.tensor("parameter", DType.F32, (3, 2), index=1, name="idx")
  y = b.tensor("output", DType.F32, (3, 2, 3), index=0, name="y")
  b.gp_gather(HbmAP.dense(y, (3, 2, 3)), HbmAP.dense(x, (6, 7)), HbmAP.dense(idx, (3, 2)))
  with pytest.raises(ValueError, match="indices must be an integer tensor, got f32"):
    _native.program_info(b.serialize())
