"""fold-transpose-into-dot: IR in / IR out, and whole programs against the JAX CPU backend
(the MLP training step whose weight gradients JAX emits as transpose(dot_general))."""

import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import sum_of_products_bounds
from hlo_lowering import importer, ir_printer, pipeline, verifier
from hlo_lowering.passes import fold_transpose_into_dot
from jax_trn import compilation


def _fold(text):
  module = importer.import_program(textwrap.dedent(text).encode(), "mlir")
  fold_transpose_into_dot.run(module)
  verifier.verify_module(module, "fold-transpose-into-dot")
  return module


def _ops(module):
  return [op.name for op in module.main.body.ops]


def test_weight_gradient_transpose_becomes_swapped_dot():
  module = _fold("""
  func.func @main(%dy: tensor<128x64xf32>, %h: tensor<128x512xf32>) -> tensor<512x64xf32> {
    %0 = stablehlo.dot_general %dy, %h, contracting_dims = [0] x [0], precision = [DEFAULT, HIGHEST] : (tensor<128x64xf32>, tensor<128x512xf32>) -> tensor<64x512xf32> loc("jit(f)/dot_general"("f.py":5:7))
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<64x512xf32>) -> tensor<512x64xf32> loc("jit(f)/transpose"("f.py":9:1))
    %2 = stablehlo.add %1, %1 : tensor<512x64xf32>
    return %2 : tensor<512x64xf32>
  }""")
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<128x64xf32>, %1: tensor<128x512xf32>):
          %2 = stablehlo.dot_general(%1, %0) {dot_dimension_numbers = {'lhs_batching_dimensions': [], 'rhs_batching_dimensions': [], 'lhs_contracting_dimensions': [0], 'rhs_contracting_dimensions': [0]}, precision_config = ['HIGHEST', 'DEFAULT']} : tensor<512x64xf32>  // jit(f)/dot_general at f.py:5:7
          %3 = stablehlo.add(%2, %2) : tensor<512x64xf32>
          func.return(%3)
      """)


def test_batch_dims_reorder_with_both_operands():
  # Result [2(b0), 3(b1), 5(lhs free), 7(rhs free)] transposed to [3, 2, 7, 5].
  module = _fold("""
  func.func @main(%a: tensor<2x3x8x5xf32>, %b: tensor<3x2x8x7xf32>) -> tensor<3x2x7x5xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0, 1] x [1, 0], contracting_dims = [2] x [2] : (tensor<2x3x8x5xf32>, tensor<3x2x8x7xf32>) -> tensor<2x3x5x7xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0, 3, 2] : (tensor<2x3x5x7xf32>) -> tensor<3x2x7x5xf32>
    return %1 : tensor<3x2x7x5xf32>
  }""")
  (dot, _) = module.main.body.ops
  a, b = module.main.args
  assert dot.operands == [b, a] and dot.result.shape == (3, 2, 7, 5)
  assert dot.attrs["dot_dimension_numbers"] == {
      "lhs_batching_dimensions": [0, 1], "rhs_batching_dimensions": [1, 0],
      "lhs_contracting_dimensions": [2], "rhs_contracting_dimensions": [2]}


def test_batch_only_permutation_keeps_operand_order():
  # The lhs's batch dims are out of order (normalize-dot-general would copy it, and the result
  # transpose is a copy too); after the fold only the rhs is copied.
  module = _fold("""
  func.func @main(%a: tensor<3x2x4x5xf32>, %b: tensor<2x3x5x6xf32>) -> tensor<3x2x4x6xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [1, 0] x [0, 1], contracting_dims = [3] x [2] : (tensor<3x2x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0, 2, 3] : (tensor<2x3x4x6xf32>) -> tensor<3x2x4x6xf32>
    return %1 : tensor<3x2x4x6xf32>
  }""")
  (dot, _) = module.main.body.ops
  assert dot.operands == module.main.args
  dims = dot.attrs["dot_dimension_numbers"]
  assert dims["lhs_batching_dimensions"] == [0, 1] and dims["rhs_batching_dimensions"] == [1, 0]


def test_batch_reorder_that_copies_both_operands_is_left():
  module = _fold("""
  func.func @main(%a: tensor<2x3x4x5xf32>, %b: tensor<2x3x5x6xf32>) -> tensor<3x2x4x6xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0, 2, 3] : (tensor<2x3x4x6xf32>) -> tensor<3x2x4x6xf32>
    return %1 : tensor<3x2x4x6xf32>
  }""")
  assert _ops(module) == ["stablehlo.dot_general", "stablehlo.transpose", "func.return"]


@pytest.mark.parametrize("why, result, permutation, transposed", [
    # A batch dim moved out of the lead: dot_general results always start with batch dims.
    ("batch not leading", "2x4x6", "[1, 0, 2]", "4x2x6"),
    # The two lhs free dims swapped among themselves: would need a transposed operand.
    ("free group reordered", "2x3x4x6", "[0, 2, 1, 3]", "2x4x3x6"),
])
def test_unfoldable_permutations_are_left(why, result, permutation, transposed):
  lhs = "2x4x5" if result == "2x4x6" else "2x3x4x5"
  contracting = "2" if result == "2x4x6" else "3"
  module = _fold(f"""
  func.func @main(%a: tensor<{lhs}xf32>, %b: tensor<2x5x6xf32>) -> tensor<{transposed}xf32> {{
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [{contracting}] x [1] : (tensor<{lhs}xf32>, tensor<2x5x6xf32>) -> tensor<{result}xf32>
    %1 = stablehlo.transpose %0, dims = {permutation} : (tensor<{result}xf32>) -> tensor<{transposed}xf32>
    return %1 : tensor<{transposed}xf32>
  }}""")
  assert _ops(module) == ["stablehlo.dot_general", "stablehlo.transpose", "func.return"], why


def test_dot_with_another_user_is_left():
  module = _fold("""
  func.func @main(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> (tensor<6x4xf32>, tensor<4x6xf32>) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
    return %1, %0 : tensor<6x4xf32>, tensor<4x6xf32>
  }""")
  assert _ops(module) == ["stablehlo.dot_general", "stablehlo.transpose", "func.return"]


def test_transposes_share_a_dot_per_permutation_and_chains_fold():
  module = _fold("""
  func.func @main(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
    %2 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
    %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<6x4xf32>) -> tensor<4x6xf32>
    return %1, %2, %3 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<4x6xf32>
  }""")
  # %1 and %2 become one swapped dot. %3 transposes that dot, which the return also reads in
  # its own layout, so %3 stays a transpose.
  assert _ops(module) == ["stablehlo.dot_general", "stablehlo.transpose", "func.return"]
  dot, transpose, ret = module.main.body.ops
  assert ret.operands == [dot.result, dot.result, transpose.result]
  assert dot.operands == list(reversed(module.main.args))

  chain = _fold("""
  func.func @main(%a: tensor<2x4x5xf32>, %b: tensor<2x5x6xf32>) -> tensor<2x4x6xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> tensor<2x4x6xf32>
    %1 = stablehlo.transpose %0, dims = [0, 2, 1] : (tensor<2x4x6xf32>) -> tensor<2x6x4xf32>
    %2 = stablehlo.transpose %1, dims = [0, 2, 1] : (tensor<2x6x4xf32>) -> tensor<2x4x6xf32>
    return %2 : tensor<2x4x6xf32>
  }""")
  (dot, ret) = chain.main.body.ops
  assert dot.operands == chain.main.args and ret.operands == [dot.result]


def test_transposed_operand_of_a_dot_is_untouched():
  text = """
  func.func @main(%a: tensor<5x4xf32>, %b: tensor<5x6xf32>) -> tensor<4x6xf32> {
    %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<5x4xf32>) -> tensor<4x5xf32>
    %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
    return %1 : tensor<4x6xf32>
  }"""
  module = _fold(text)
  before = importer.import_program(textwrap.dedent(text).encode(), "mlir")
  assert ir_printer.format_module(module) == ir_printer.format_module(before)


def test_runs_between_canonicalize_and_normalize_dot_general():
  names = [p.name for p in pipeline.PASSES]
  i = names.index("fold-transpose-into-dot")
  assert names[i - 1] == "canonicalize" and names[i + 1] == "normalize-dot-general"


# --- whole programs, compared with the JAX CPU backend ---------------------------------------

def _mlp_inputs():
  rng = np.random.default_rng(0)

  def dense(n_in, n_out):
    return ((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
            np.zeros((n_out,), np.float32))
  params = (dense(256, 512), dense(512, 64))
  x = rng.standard_normal((128, 256)).astype(np.float32)
  y = rng.standard_normal((128, 64)).astype(np.float32)
  return params, x, y


def _mlp_loss(params, x, y):
  (w1, b1), (w2, b2) = params
  h = jnp.tanh(x @ w1 + b1)
  return jnp.mean((h @ w2 + b2 - y) ** 2)


def sgd_step(params, x, y):
  loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
  return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


def _device_time_ns(program, args) -> float:
  inputs = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
  _, profile = harness.native().run_program(program, inputs)
  return profile["device_time_ns"]


def test_mlp_training_step_has_no_gpsimd_transpose_and_runs_faster(monkeypatch):
  args = _mlp_inputs()
  program = harness.check(sgd_step, *args, scale=50)
  report = compilation.last_report()
  assert not [o for o in report.gpsimd_ops() if o.op == "stablehlo.transpose"], report.format()
  folded_ns = _device_time_ns(program, args)

  without = tuple(p for p in pipeline.PASSES if p.name != "fold-transpose-into-dot")
  run_pipeline = pipeline.run_pipeline
  monkeypatch.setattr(pipeline, "run_pipeline",
                      lambda module, tag="0": run_pipeline(module, tag, passes=without))
  unfolded_ns = _device_time_ns(harness.compile_fn(sgd_step, *args), args)
  assert [o.op for o in compilation.last_report().gpsimd_ops()].count("stablehlo.transpose") == 2
  print(f"MLP sgd_step modeled device time: {unfolded_ns / 1e3:.1f} us without the pass, "
        f"{folded_ns / 1e3:.1f} us with it")
  assert folded_ns < 0.8 * unfolded_ns


def _batch_swapped_dot(a, b):
  """[3,2,M,K] x [2,3,K,N] batched over (a1,b0), (a0,b1), then transposed batch- and free-wise."""
  product = jax.lax.dot_general(a, b, (((3,), (2,)), ((1, 0), (0, 1))))
  return jnp.transpose(product, (1, 0, 3, 2)) * 3.0


# name: (f, lhs shape, rhs shape, contraction size, transposes still moving data after the pass:
# GpSimd copies, or DMA copies when the innermost dim stays innermost; views move none)
TRANSPOSED_PRODUCTS = {
    # (A·B)ᵀ feeding an elementwise op: the transpose used to be a GpSimd copy.
    "matmul_T": (lambda a, b: (a @ b).T * 2.0, (96, 40), (40, 72), 40, 0),
    "batched_swapaxes": (lambda a, b: jnp.swapaxes(a @ b, 1, 2) + 1.0, (3, 24, 40), (3, 40, 20),
                         40, 0),
    "weight_gradient": (lambda dy, h: jax.lax.dot_general(dy, h, (((0,), (0,)), ((), ()))).T
                        * 0.1, (64, 24), (64, 48), 64, 0),
    # Reordering the batch dims fixes the lhs's order and breaks the rhs's: one operand copy
    # (was: an lhs copy and a result copy).
    "batch_permuted": (_batch_swapped_dot, (3, 2, 16, 24), (2, 3, 24, 12), 24, 1),
    # Here it would copy both operands (more elements than the result): left as a transpose.
    "batch_permuted_unprofitable": (lambda a, b: jnp.transpose(a @ b, (1, 0, 3, 2)) - 0.5,
                                    (2, 3, 16, 24), (2, 3, 24, 12), 24, 1),
    # einsum picks the operand order itself; these must stay correct through the pass (the
    # 'bakn' operand's batch order is copied by normalize-dot-general, as before).
    "einsum_mk_kn_nm": (lambda a, b: jnp.einsum("mk,kn->nm", a, b), (20, 30), (30, 12), 30, 0),
    "einsum_bmk_bkn_bnm": (lambda a, b: jnp.einsum("bmk,bkn->bnm", a, b), (2, 20, 30),
                           (2, 30, 12), 30, 0),
    "einsum_abmk_bakn_banm": (lambda a, b: jnp.einsum("abmk,bakn->banm", a, b),
                              (2, 3, 8, 16), (3, 2, 16, 6), 16, 1),
    # Batch dim moved behind a free dim: not foldable, stays a transpose, which the matmul
    # writes in place (its rows stay contiguous: lowering/in_place.py).
    "einsum_bmk_bkn_nbm": (lambda a, b: jnp.einsum("bmk,bkn->nbm", a, b), (2, 20, 30),
                           (2, 30, 12), 30, 0),
}


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(TRANSPOSED_PRODUCTS))
def test_transposed_products_match_cpu(name, dtype):
  f, lhs_shape, rhs_shape, k, copied_transposes = TRANSPOSED_PRODUCTS[name]
  rng = np.random.default_rng(1)
  a = rng.standard_normal(lhs_shape).astype(dtype)
  b = rng.standard_normal(rhs_shape).astype(dtype)
  harness.check(f, a, b, bounds=sum_of_products_bounds(f, a, b, terms=k))
  transposes = [o for o in compilation.last_report().ops
                if o.op == "stablehlo.transpose" and o.instructions]
  assert len(transposes) == copied_transposes, compilation.last_report().format()
