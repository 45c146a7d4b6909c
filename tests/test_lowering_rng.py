"""stablehlo.rng_bit_generator (decompose-rng-bit-generator) against the JAX CPU backend: the
bits and the new state of every algorithm are XLA CPU's bit for bit."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import compiler_harness as harness
from hlo_lowering.errors import CompileError
from jax_trn import compilation

ALGORITHMS = {"THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
              "PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
              "DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT}
DTYPES = [np.uint32, np.uint64, np.uint8, np.uint16]
SHAPES = [(), (1,), (5,), (8,), (130,), (3, 7), (4, 5, 3), (7, 1, 9), (129, 130), (0,), (2, 0)]
# Keys whose counter words sit next to a carry (low u64 word near 2**64).
KEYS = [np.array([0x12345678, 0x9ABCDEF0, 7, 0xFFFFFFFE], np.uint32),
        np.array([5, 6, 0xFFFFFFF0, 0xFFFFFFFF], np.uint32)]


def _cases(count):
  everything = [(a, d, s) for a in ALGORITHMS for d in DTYPES for s in SHAPES]
  sample = random.Random(0).sample(everything, count)
  # Every algorithm × dtype at least once on an odd multi-dimensional shape.
  return sample + [(a, d, (3, 7)) for a in ALGORITHMS for d in DTYPES]


@pytest.mark.parametrize("name,dtype,shape", _cases(40))
def test_bits_and_state_match_cpu(name, dtype, shape):
  with jax.enable_x64(True):
    for key in KEYS:
      harness.check(lambda k: lax.rng_bit_generator(k, shape, dtype, ALGORITHMS[name]), key)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_chained_calls(name):
  def f(key):
    outs = []
    for shape, dtype in (((5,), jnp.uint32), ((2, 3), jnp.uint8), ((4,), jnp.uint32)):
      key, bits = lax.rng_bit_generator(key, shape, dtype, ALGORITHMS[name])
      outs.append(bits)
    return key, outs
  harness.check(f, KEYS[0])


def test_constant_state_folds_and_matches():
  key = KEYS[1]
  harness.check(lambda x: (x, lax.rng_bit_generator(jnp.asarray(key), (6, 5), jnp.uint32)), key)


def test_state_carried_through_a_runtime_loop():
  def f(key, n):
    def body(_, carry):
      key, acc = carry
      key, bits = lax.rng_bit_generator(key, (3, 5), jnp.uint32, ALGORITHMS["PHILOX"])
      return key, acc ^ bits
    return lax.fori_loop(0, n, body, (key, jnp.zeros((3, 5), jnp.uint32)))
  harness.check(f, KEYS[0], np.int32(4))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_rbg_prng(impl):
  def f(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(k1, (33, 5)), jax.random.uniform(k2, (7,)),
            jax.random.bits(k2, (3,)), jax.random.randint(k1, (9,), 0, 10))
  previous = jax.config.jax_default_prng_impl
  jax.config.update("jax_default_prng_impl", impl)
  try:
    harness.check(f, np.int32(3))
  finally:
    jax.config.update("jax_default_prng_impl", previous)


# u64[3] Philox states and other state shapes: JAX's lax.rng_bit_generator only builds u64[2], so
# these run from MLIR text on both backends.
_TEXT = """
func.func public @main(%arg0: tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<{shape}xui{bits}>) {{
  %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = {alg} : (tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<{shape}xui{bits}>)
  return %s, %o : tensor<{n}xui64>, tensor<{shape}xui{bits}>
}}"""


def _run_cpu(text, state):
  from jax._src.lib import xla_client as xc
  dev = jax.devices("cpu")[0]
  exe = dev.client.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
  with jax.enable_x64(True):
    out = exe.execute_sharded([jax.device_put(state, dev)])
    return [np.asarray(x[0]) for x in out.disassemble_into_single_device_arrays()]


@pytest.mark.parametrize("alg", ["PHILOX", "DEFAULT"])
@pytest.mark.parametrize("shape,bits", [("7", 32), ("3x5", 64), ("4x3", 16)])
def test_philox_u64x3_state(alg, shape, bits):
  harness.native()
  text = _TEXT.format(n=3, shape=shape, bits=bits, alg=alg)
  for state in ([1, 2, 3], [9, 2**64 - 3, 2**64 - 1]):
    state = np.array(state, np.uint64)
    expected = _run_cpu(text, state)
    program = harness.compile_code(text.encode())
    actual = harness.run_program(program, [state])
    for a, e in zip(actual, expected):
      assert a.dtype == e.dtype and a.shape == e.shape
      np.testing.assert_array_equal(a, e)


def test_threefry_rejects_a_u64x3_state():
  text = _TEXT.format(n=3, shape="7", bits=32, alg="THREE_FRY")
  with pytest.raises(CompileError, match=r"THREE_FRY takes a u64\[2\] state"):
    harness.compile_code(text.encode())


def test_report_shows_no_rng_op_left():
  harness.compile_fn(lambda k: lax.rng_bit_generator(k, (5,), jnp.uint32), KEYS[0])
  assert "stablehlo.rng_bit_generator" not in compilation.last_report().summary()


def test_pass_leaves_only_integer_ops_that_verify():
  from hlo_lowering import importer, verifier
  from hlo_lowering.ir import walk_ops
  from hlo_lowering.passes import decompose_rng_bit_generator
  text = _TEXT.format(n=2, shape="3x5", bits=32, alg="THREE_FRY")
  module = importer.import_program(text.encode(), "mlir")
  decompose_rng_bit_generator.run(module)
  verifier.verify_module(module, "decompose-rng-bit-generator")
  names = {op.name for op in walk_ops(module.main.body)}
  assert "stablehlo.rng_bit_generator" not in names
  assert names <= {"stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.slice",
                   "stablehlo.reshape", "stablehlo.convert", "stablehlo.add", "stablehlo.xor",
                   "stablehlo.or", "stablehlo.shift_left", "stablehlo.shift_right_logical",
                   "stablehlo.iota", "stablehlo.concatenate", "func.return"}
