"""IR in / IR out tests of each pass, plus the importer, the verifier and TRN_DUMP_IR."""

import pathlib
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hlo_lowering import backend, importer, ir_printer, pipeline, verifier
from hlo_lowering.passes import (canonicalize, check_supported, fuse_attention, inline_calls,
                                 narrow_float64, normalize_dot_general,
                                 strip_single_device_sharding, unroll_static_loops, widen_int4)
from hlo_lowering.errors import CompileError


def _module(text):
  return importer.import_program(textwrap.dedent(text).encode(), "mlir")


def _ops(module):
  return [op.name for op in module.main.body.ops]


CALLS = """
func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @twice(%a) : (tensor<4xf32>) -> tensor<4xf32> loc("jit(f)/twice"("f.py":3:4))
  return %0 : tensor<4xf32>
}
func.func private @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_inline_calls():
  module = _module(CALLS)
  inline_calls.run(module)
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<4xf32>):
          %1 = stablehlo.add(%0, %0) : tensor<4xf32>  // jit(f)/twice at f.py:3:4
          func.return(%1)
      """)


def test_inline_calls_inlines_composites_through_their_decomposition():
  module = _module("""
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.composite "chlo.erf" %a {decomposition = @erf_impl}
        : (tensor<4xf32>) -> tensor<4xf32> loc("jit(f)/erf"("f.py":5:6))
    return %0 : tensor<4xf32>
  }
  func.func private @erf_impl(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }""")
  inline_calls.run(module)
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<4xf32>):
          %1 = stablehlo.tanh(%0) : tensor<4xf32>  // jit(f)/erf at f.py:5:6
          func.return(%1)
      """)


def test_strip_single_device_sharding_forwards_operands():
  module = _module("""
  sdy.mesh @mesh = <["d"=1]>
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = sdy.sharding_constraint %a <@mesh, [{}]> : tensor<4xf32>
    %1 = stablehlo.add %0, %0 : tensor<4xf32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{"d"}]> : tensor<4xf32>
    return %2 : tensor<4xf32>
  }""")
  strip_single_device_sharding.run(module)
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<4xf32>):
          %1 = stablehlo.add(%0, %0) : tensor<4xf32>
          func.return(%1)
      """)


def test_canonicalize_names_reducers_folds_and_removes_dead_ops():
  module = _module("""
  func.func @main(%a: tensor<4x3xf32>) -> (tensor<4xf32>, tensor<i32>) {
    %init = stablehlo.constant dense<0.0> : tensor<f32>
    %r = stablehlo.reduce(%a init: %init) applies stablehlo.add across dimensions = [1]
        : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
    %c1 = stablehlo.constant dense<3> : tensor<i32>
    %c2 = stablehlo.constant dense<4> : tensor<i32>
    %s = stablehlo.multiply %c1, %c2 : tensor<i32>
    %dead = stablehlo.exponential %a : tensor<4x3xf32>
    return %r, %s : tensor<4xf32>, tensor<i32>
  }""")
  canonicalize.run(module)
  ops = module.main.body.ops
  assert _ops(module) == ["stablehlo.constant", "stablehlo.reduce", "stablehlo.constant",
                          "func.return"]
  assert ops[1].attrs["reducer"] == "add"
  assert ops[2].attrs["value"] == np.int32(12)


def test_unroll_static_loops():
  module = _module("""
  func.func @main(%x: tensor<ui32>) -> tensor<ui32> {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<ui32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      %w = stablehlo.xor %v, %v : tensor<ui32>
      %w2 = stablehlo.add %w, %v : tensor<ui32>
      stablehlo.return %next, %w2 : tensor<i32>, tensor<ui32>
    }
    return %r#1 : tensor<ui32>
  }""")
  unroll_static_loops.run(module)
  canonicalize.run(module)
  assert _ops(module).count("stablehlo.xor") == 3
  assert "stablehlo.while" not in _ops(module)
  verifier.verify_module(module, "test")


def test_runtime_trip_count_is_left_alone():
  module = _module("""
  func.func @main(%n: tensor<i32>) -> tensor<i32> {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r = stablehlo.while(%i = %zero) : tensor<i32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %next : tensor<i32>
    }
    return %r : tensor<i32>
  }""")
  unroll_static_loops.run(module)
  assert "stablehlo.while" in _ops(module)


def test_normalize_dot_general():
  module = _module("""
  func.func @main(%a: tensor<2x8x5xf32>, %b: tensor<3x2x8xf32>) -> tensor<2x5x3xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [1], contracting_dims = [1] x [2]
        : (tensor<2x8x5xf32>, tensor<3x2x8xf32>) -> tensor<2x5x3xf32>
    return %0 : tensor<2x5x3xf32>
  }""")
  normalize_dot_general.run(module)
  verifier.verify_module(module, "normalize-dot-general")
  text = ir_printer.format_module(module)
  assert _ops(module) == ["stablehlo.transpose", "stablehlo.transpose", "stablehlo.dot_general",
                          "func.return"]
  assert "permutation = [0, 2, 1]" in text and "permutation = [1, 2, 0]" in text
  assert normalize_dot_general.is_batch_matmul(module.main.body.ops[2])


def test_normalize_matrix_vector_reshapes():
  module = _module("""
  func.func @main(%a: tensor<4x6xf32>, %b: tensor<6xf32>) -> tensor<4xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
        : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }""")
  normalize_dot_general.run(module)
  assert _ops(module) == ["stablehlo.reshape", "stablehlo.reshape", "stablehlo.dot_general",
                          "stablehlo.reshape", "func.return"]
  assert module.main.body.ops[2].result.shape == (1, 4, 1)


def test_check_supported_rejects_f64():
  module = _module("""
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf64> {
    %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xf64>
    return %0 : tensor<4xf64>
  }""")
  with pytest.raises(CompileError, match="no float64"):
    check_supported.run(module)


def test_importer_keeps_locations_attributes_and_splats():
  module = _module("""
  func.func @main(%a: tensor<2x3xbf16>) -> tensor<2x3xi1> {
    %c = stablehlo.constant dense<[[1.5, 0x7FC0, 2.0], [0.0, -1.0, 3.0]]> : tensor<2x3xbf16>
    %0 = stablehlo.compare GT, %a, %c : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xi1> loc("jit(f)/gt"(callsite("f"("/home/u/model.py":7:9) at "g"("/usr/lib/python3/site-packages/jax/x.py":1:1))))
    return %0 : tensor<2x3xi1>
  }""")
  constant, compare = module.main.body.ops[:2]
  value = constant.attrs["value"]
  assert value.dtype.name == "bfloat16" and float(value[0, 0]) == 1.5 and np.isnan(float(value[0, 1]))
  assert compare.attrs["comparison_direction"] == "GT"
  assert compare.loc.name == "jit(f)/gt" and compare.loc.position == "/home/u/model.py:7:9"


def test_chlo_text_is_legalized():
  module = _module("""
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.square %a : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }""")
  assert _ops(module) == ["stablehlo.multiply", "func.return"]


def test_dump_and_verify_every_pass(tmp_path, monkeypatch):
  monkeypatch.setenv("TRN_DUMP_IR", str(tmp_path))
  monkeypatch.setenv("TRN_VERIFY_IR", "1")
  pipeline.run_pipeline(_module(CALLS), tag="t")
  names = sorted(p.name for p in tmp_path.iterdir())
  assert names[0] == "t-00-import.ir"
  assert [n.split("-", 2)[2][:-3] for n in names[1:]] == [p.name for p in pipeline.PASSES]


def test_verifier_catches_use_before_definition():
  module = _module(CALLS)
  inline_calls.run(module)
  body = module.main.body
  body.ops.insert(0, body.ops.pop(-1))  # return before the add
  with pytest.raises(verifier.IRVerificationError, match="before its definition"):
    verifier.verify_module(module, "broken-pass")


def test_verifier_checks_what_the_pass_ensures():
  module = _module(CALLS)
  with pytest.raises(verifier.IRVerificationError, match="twice.* remain besides the entry function"):
    verifier.verify_module(module, "inline-calls")
  inline_calls.run(module)
  verifier.verify_module(module, "inline-calls")
  dot = _module("""
  func.func @main(%a: tensor<8x5xf32>, %b: tensor<5x3xf32>) -> tensor<8x3xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
        : (tensor<8x5xf32>, tensor<5x3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }""")
  with pytest.raises(verifier.IRVerificationError, match="is not in batch-matmul form"):
    verifier.verify_module(dot, "normalize-dot-general")
  verifier.verify_module(dot, "inline-calls")  # each pass is held to its own Ensures only
  normalize_dot_general.run(dot)
  verifier.verify_module(dot, "normalize-dot-general")


def test_check_supported_names_an_op_without_a_rule():
  module = _module("""
  func.func public @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = "stablehlo.cholesky"(%a) {lower = true} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  """)
  with pytest.raises(CompileError, match="cholesky is not supported.*no lowering rule is "
                                         "registered"):
    check_supported.run(module)


def _table_names(section: str) -> list[str]:
  """The first-column names of the table under `## <section>` in docs/compiler.md."""
  text = (pathlib.Path(__file__).parents[1] / "docs" / "compiler.md").read_text()
  body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
  return re.findall(r"^\| `([a-z0-9-]+)` \|", body, re.MULTILINE)


def test_compiler_doc_lists_passes_and_stages_in_pipeline_order():
  assert _table_names("Passes") == [p.name for p in pipeline.PASSES]
  assert _table_names("Back-end stages") == [s.name for s in backend.STAGES]


def test_narrow_float64_scalars_in_a_program_from_an_hlo_proto():
  """torch_xla's `x > 0.5`: the f64[] argument is loaded once as f32, the tensor's convert to
  f64 disappears and the compare runs on f32. The same module from JAX is left alone."""
  text = """
  func.func public @main(%s: tensor<f64>, %x: tensor<4xf32>) -> tensor<4xi1> {
    %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf64>
    %1 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f64>) -> tensor<4xf64>
    %2 = stablehlo.compare GT, %0, %1 : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
    return %2 : tensor<4xi1>
  }"""
  jax_module = _module(text)
  before = ir_printer.format_module(jax_module)
  narrow_float64.run(jax_module)
  assert ir_printer.format_module(jax_module) == before
  module = _module(text)
  module.source_format = "hlo"
  narrow_float64.run(module)
  verifier.verify_module(module, "narrow-float64")
  assert ir_printer.format_module(module) == textwrap.dedent("""\
      func public @main
        ^(%0: tensor<f64>, %1: tensor<4xf32>):
          %2 = stablehlo.convert(%0) : tensor<f32>
          %3 = stablehlo.broadcast_in_dim(%2) {broadcast_dimensions = []} : tensor<4xf32>
          %4 = stablehlo.compare(%1, %3) {comparison_direction = 'GT'} : tensor<4xpred>
          func.return(%4)
      """)


def test_fuse_attention_moves_the_scores_matmul_into_the_softmax_row_fusion():
  """q·kᵀ read only by the softmax's row fusion becomes that row fusion's first op, on two new
  block arguments; the verifier's check of fuse-attention holds."""
  def f(q, k):
    return jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2), axis=-1)
  q = np.zeros((2, 128, 64), np.float32)
  module = _module(jax.jit(f).lower(q, q).as_text())
  until = [p.name for p in pipeline.PASSES].index("fuse-attention")
  pipeline.run_pipeline(module, passes=pipeline.PASSES[:until])
  assert "stablehlo.dot_general" in _ops(module)
  fuse_attention.run(module)
  verifier.verify_module(module, "fuse-attention")
  assert "stablehlo.dot_general" not in _ops(module)
  (fusion,) = [op for op in module.main.body.ops if op.name == "trn.row_fusion"]
  region = fusion.regions[0].block
  assert region.ops[0].name == "stablehlo.dot_general"
  assert all(any(v is a for a in region.args) for v in region.ops[0].operands)


def test_widen_int4_wraps_only_what_can_leave_the_range():
  """An add wraps (shift left, arithmetic shift right); a max and a reshape do not; a sum keeps
  its one-op body and wraps its result; the int4 argument is read from its low nibble and the
  result written as it."""
  module = _module("""
  func.func public @main(%x: tensor<4xi4>) -> tensor<2x2xi4> {
    %0 = stablehlo.add %x, %x : tensor<4xi4>
    %1 = stablehlo.maximum %0, %x : tensor<4xi4>
    %c = stablehlo.constant dense<-8> : tensor<i4>
    %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [0]
        : (tensor<4xi4>, tensor<i4>) -> tensor<i4>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<i4>) -> tensor<4xi4>
    %4 = stablehlo.reshape %3 : (tensor<4xi4>) -> tensor<2x2xi4>
    return %4 : tensor<2x2xi4>
  }""")
  widen_int4.run(module)
  verifier.verify_module(module, "widen-int4")
  computing = [n for n in _ops(module) if n not in ("stablehlo.constant",
                                                     "stablehlo.broadcast_in_dim")]
  assert computing == [
      "stablehlo.shift_left", "stablehlo.shift_right_arithmetic",  # the argument's load
      "stablehlo.add", "stablehlo.shift_left", "stablehlo.shift_right_arithmetic",
      "stablehlo.maximum", "stablehlo.reduce", "stablehlo.shift_left",
      "stablehlo.shift_right_arithmetic", "stablehlo.reshape",
      "stablehlo.and",  # the result's low nibble
      "func.return"]
  main = module.main
  assert main.nibble_args == {0} and main.nibble_results == {0}
  reduce = next(op for op in main.body.ops if op.name == "stablehlo.reduce")
  assert [op.name for op in reduce.regions[0].block.ops] == ["stablehlo.add", "stablehlo.return"]
  init = next(op for op in main.body.ops if op.name == "stablehlo.constant"
              and op.result is reduce.operands[1])
  assert init.attrs["value"].dtype == np.int8 and int(init.attrs["value"]) == -8
