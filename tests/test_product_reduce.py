"""An add-reduce of a multiply nothing else reads is one trn.product_reduce
(passes/fold_product_into_reduce.py): the reduce multiplies each tile it loads (the columns
layout) or makes the product first (elsewhere). Results match the CPU backend and are
bit-identical to the program compiled without the pass, at LNC 1 and 2."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering import importer, pipeline
from hlo_lowering.ir import walk_ops
from hlo_lowering.passes.fold_product_into_reduce import PRODUCT_REDUCE

_BF16 = jnp.bfloat16


def _folded(f, args) -> int:
  module = importer.import_program(jax.jit(f).lower(*args).as_text().encode(), "mlir")
  pipeline.run_pipeline(module)
  return sum(op.name == PRODUCT_REDUCE for op in walk_ops(module.main.body))


def _scale_gradient(g, x):  # a layernorm's (the columns layout)
  return jnp.sum(g * x, axis=0)


def _outer_and_inner(g, x):  # reduced dims that hold the contiguous one (the rows layout, not
  return jnp.sum(g * x, axis=(0, 2))  # a row fusion's): the product is made first


CASES = [("scale gradient bf16", _scale_gradient, (2048, 1024), _BF16, 2048),
         ("scale gradient f32, odd sizes", _scale_gradient, (1000, 777), np.float32, 1000),
         ("batched scale gradient", _scale_gradient, (64, 96, 512), _BF16, 64),
         ("outer and inner dims", _outer_and_inner, (16, 256, 200), np.float32, 16 * 200)]


@pytest.mark.parametrize("name,f,shape,dtype,terms", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("lnc", [1, 2])
def test_a_folded_product_keeps_the_unfolded_bits(name, f, shape, dtype, terms, lnc):
  rng = np.random.default_rng(0)
  args = [rng.standard_normal(shape).astype(dtype) for _ in range(2)]
  assert _folded(f, args) == 1
  if dtype == np.float32:  # any fp32 order of the sum is within the bound
    harness.check(f, *args, lnc=lnc, bounds=sum_of_products_bounds(f, *args, terms=terms))
  runs = []
  for skipped in ((), ("fold-product-into-reduce",)):
    program = harness.compile_without(f, args, skipped, lnc=lnc)
    runs.append(harness.native().run_program(program, args))
  (folded, profile), (unfolded, unfolded_profile) = runs
  assert [a.tobytes() for a in folded] == [a.tobytes() for a in unfolded]
  if dtype != np.float32:
    # The CPU backend sums bf16 in bf16 (a rounding further off than an fp32 sum can be), so
    # compare with the exact sum of the bf16 products: an fp32 sum's bound plus the bf16 result's
    # rounding.
    products = (args[0].astype(np.float32) * args[1].astype(np.float32)).astype(dtype)
    products = products.astype(np.float64)
    dims = (0,) if f is _scale_gradient else (0, 2)
    exact, magnitude = products.sum(dims), np.abs(products).sum(dims)
    allowed = 2 * terms * 2.0 ** -24 * magnitude + 2.0 ** -8 * np.abs(exact) * 1.01
    error = np.abs(folded[0].astype(np.float64) - exact)
    assert (error <= allowed).all()
    # Against the CPU backend: never more than a bf16 ulp further from the exact sum than it.
    cpu = jax.jit(f)(*[jax.device_put(a, jax.devices("cpu")[0]) for a in args])
    cpu_error = np.abs(np.asarray(cpu).astype(np.float64) - exact)
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** -100))) - 7)
    assert (error <= cpu_error + ulp).all()
  if f is _scale_gradient:  # the columns layout: the product no longer crosses HBM
    product = args[0].nbytes
    assert profile["hbm_bytes"] <= unfolded_profile["hbm_bytes"] - 1.9 * product


def test_a_product_read_twice_or_a_max_of_products_stays_apart():
  rng = np.random.default_rng(1)
  args = [rng.standard_normal((256, 128)).astype(np.float32) for _ in range(2)]

  def read_twice(g, x):
    p = g * x
    return jnp.sum(p, axis=0), p

  assert _folded(read_twice, args) == 0
  assert _folded(lambda g, x: jnp.max(g * x, axis=0), args) == 0
