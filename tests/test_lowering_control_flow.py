"""Control flow known at run time (stablehlo.while / case / if) through the compiler and the
simulator, against the JAX CPU backend."""

import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compiler_harness import check, compile_fn
from hlo_lowering.program import ControlOp, read_program


def _blocks(program: bytes):
  return read_program(program).blocks


def test_while_newton_sqrt_until_convergence():
  def newton_sqrt(a):
    def cond(state):
      x, previous = state
      return jnp.abs(x - previous) > 1e-6 * x
    def body(state):
      x, _ = state
      return 0.5 * (x + a / x), x
    return lax.while_loop(cond, body, (a, a + 1.0))[0]
  program = check(newton_sqrt, np.float32(2.0))
  check(newton_sqrt, np.float32(1234.5))
  exits = [b.exit.op for b in _blocks(program)]
  assert ControlOp.BRANCH in exits and ControlOp.JUMP in exits


def test_while_collatz_integer_loop():
  def collatz(n):
    def body(state):
      x, steps = state
      return jnp.where(x % 2 == 0, x // 2, 3 * x + 1), steps + 1
    return lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.int32(0)))
  check(collatz, np.int32(27))   # 111 steps
  check(collatz, np.int32(1))    # zero iterations: the results are the operands


def test_fori_loop_with_traced_bounds():
  def f(lo, hi, x):
    return lax.fori_loop(lo, hi, lambda i, v: v * 1.5 + i.astype(jnp.float32), x)
  x = np.linspace(-1, 1, 300, dtype=np.float32).reshape(3, 100)
  check(f, np.int32(2), np.int32(7), x)
  check(f, np.int32(5), np.int32(5), x)


def test_nested_loops():
  def f(n, x):
    def outer(i, acc):
      inner = lax.fori_loop(0, i + 1, lambda j, a: a + j.astype(jnp.float32), acc)
      return inner * 0.5
    return lax.fori_loop(0, n, outer, x)
  check(f, np.int32(6), np.arange(8, dtype=np.float32))


def test_loop_carries_a_tuple_of_mixed_dtypes():
  def f(x, k, flags):
    def cond(s):
      return s[1] < 10
    def body(s):
      a, i, b, h = s
      return (a * 0.5 + 1.0, i + 3, jnp.logical_not(b), (h + h).astype(jnp.bfloat16))
    return lax.while_loop(cond, body, (x, k, flags, x.astype(jnp.bfloat16)))
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  check(f, x, np.int32(0), np.array([True, False, True]))


def test_loop_that_swaps_its_carried_values():
  def f(a, b, n):
    return lax.fori_loop(0, n, lambda i, s: (s[1], s[0] + s[1]), (a, b))
  check(f, np.float32(0), np.float32(1), np.int32(20))


def test_cond_and_switch_with_runtime_selectors():
  def cond_fn(p, x):
    return lax.cond(p > 0, lambda v: jnp.sin(v) * 2, lambda v: v - 3, x)
  x = np.linspace(0, 3, 16, dtype=np.float32)
  check(cond_fn, np.float32(1), x)
  check(cond_fn, np.float32(-1), x)

  def switch_fn(i, x):
    return lax.switch(i, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)
  for index in (0, 1, 2):
    check(switch_fn, np.int32(index), x)


def test_switch_index_out_of_range_takes_the_last_branch():
  # jax clamps the index itself; stablehlo.case takes the last branch for any index out of
  # range, which this checks by running the compiled case on raw indices.
  def switch_fn(i, x):
    return lax.switch(i, [lambda v: v + 1, lambda v: v * 2, lambda v: v - 7], x)
  x = np.arange(5, dtype=np.int32)
  for index in (-4, 3, 1000):
    check(switch_fn, np.int32(index), x)


def test_cond_inside_a_while():
  def f(n, x):
    def body(i, v):
      return lax.cond(i % 3 == 0, lambda u: u * 2.0, lambda u: u + 1.0, v)
    return lax.fori_loop(0, n, body, x)
  check(f, np.int32(10), np.ones((2, 3), np.float32))


def test_constant_switch_index():
  def f(x):
    return lax.switch(1, [lambda v: v + 1, lambda v: v * 3], x)
  check(f, np.arange(4, dtype=np.float32))


def test_small_static_loop_is_unrolled():
  def f(x):
    return lax.fori_loop(0, 4, lambda i, v: v * 2.0 + 1.0, x)
  program = check(f, np.ones(8, np.float32))
  assert len(_blocks(program)) == 1


def test_large_static_fori_loop_is_a_real_loop():
  def f(x):
    return lax.fori_loop(0, 100_000, lambda i, v: v * 0.99999 + 1.0, x)
  start = time.perf_counter()
  program = compile_fn(f, np.float32(1.0))
  assert time.perf_counter() - start < 5.0
  blocks = _blocks(program)
  assert 1 < len(blocks) < 10
  assert sum(len(i) for b in blocks for i in b.streams.values()) < 100
  check(f, np.float32(1.0))
