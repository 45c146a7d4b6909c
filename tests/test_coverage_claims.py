"""The coverage report is true: every claim of hlo_lowering.coverage is checked by compiling.

For every op the report calls native or GpSimd, the programs of PROGRAMS[op] compile and their
compile reports together show each kind the report claims; for every op it calls rewritten, a
program with it compiles and the op is gone; for every op it calls unsupported, compiling
PROGRAMS[op] raises CompileError naming the op. An op whose status changes (a new rule) keeps
its program: the same program then checks the new claim. An op missing here fails
`test_every_op_has_a_program`. Programs are tiny MLIR modules (f32[4] unless the op needs more).
"""

from __future__ import annotations

import pytest

from hlo_lowering import coverage, limitations
from hlo_lowering.errors import CompileError
from hlo_lowering.program import DType, HbmAP
from hlo_lowering.program.kernel_program import (INPUT, OUTPUT, KernelInstruction, KernelProgram,
                                                  KernelTensor)
from jax_trn import compilation

pytest.importorskip("jax_trn._native", reason="jax_trn._native is not built", exc_type=ImportError)

F = "tensor<4xf32>"
I = "tensor<4xi32>"


def module(args: str, results: str, body: str) -> str:
  """func @main(args) -> results with `body` (whose last line is the return)."""
  return f"func.func @main({args}) -> ({results}) {{\n{body}\n}}"


def unary(op: str, t: str = F, rt: str | None = None) -> str:
  return module(f"%a: {t}", rt or t,
                f"%0 = \"{op}\"(%a) : ({t}) -> {rt or t}\nreturn %0 : {rt or t}")


def binary(op: str, t: str = F) -> str:
  return module(f"%a: {t}, %b: {t}", t,
                f"%0 = \"{op}\"(%a, %b) : ({t}, {t}) -> {t}\nreturn %0 : {t}")


_FLOAT_UNARY = ("abs", "negate", "exponential", "exponential_minus_one", "log", "log_plus_one",
                "tanh", "logistic", "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "floor",
                "ceil", "round_nearest_even", "round_nearest_afz", "sign")
_INT_UNARY = ("not", "popcnt", "count_leading_zeros")
_FLOAT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
                 "power", "atan2")
_INT_BINARY = ("and", "or", "xor", "shift_left", "shift_right_logical", "shift_right_arithmetic")

_REDUCE = """
%z = stablehlo.constant dense<{init}> : tensor<f32>
%0 = stablehlo.reduce(%a init: %z) applies stablehlo.{body} across dimensions = [0] : ({F}, tensor<f32>) -> tensor<f32>
return %0 : tensor<f32>"""
_ARGMAX = """
%ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
%zero = stablehlo.constant dense<0> : tensor<i32>
%i = stablehlo.iota dim = 0 : tensor<4xi32>
%0:2 = stablehlo.reduce(%a init: %ninf), (%i init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
 reducer(%x: tensor<f32>, %y: tensor<f32>) (%xi: tensor<i32>, %yi: tensor<i32>) {
  %gt = stablehlo.compare GT, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %ne = stablehlo.compare NE, %x, %x, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %p = stablehlo.or %gt, %ne : tensor<i1>
  %eq = stablehlo.compare EQ, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %lt = stablehlo.compare LT, %xi, %yi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %tie = stablehlo.and %eq, %lt : tensor<i1>
  %q = stablehlo.or %p, %tie : tensor<i1>
  %v = stablehlo.select %p, %x, %y : tensor<i1>, tensor<f32>
  %w = stablehlo.select %q, %xi, %yi : tensor<i1>, tensor<i32>
  stablehlo.return %v, %w : tensor<f32>, tensor<i32>
}
return %0#1 : tensor<i32>"""
_PAIR_SUM = """
%z = stablehlo.constant dense<0.0> : tensor<f32>
%0:2 = stablehlo.reduce(%a init: %z), (%b init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
 reducer(%x: tensor<f32>, %y: tensor<f32>) (%u: tensor<f32>, %v: tensor<f32>) {
  %s = stablehlo.add %x, %y : tensor<f32>
  %t = stablehlo.add %u, %v : tensor<f32>
  stablehlo.return %s, %t : tensor<f32>, tensor<f32>
}
return %0#0 : tensor<f32>"""
_SORT = """
%0 = "stablehlo.sort"(%a) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %lt = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
  stablehlo.return %lt : tensor<i1>
}) {dimension = 0 : i64, is_stable = true} : (tensor<4xf32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_GATHER = """
%0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false} : (tensor<4xf32>, tensor<2x1xi32>) -> tensor<2xf32>
return %0 : tensor<2xf32>"""
_SCATTER = """
%0 = "stablehlo.scatter"(%a, %i, %u) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %s = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %s : tensor<f32>
}) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_STATIC_WHILE = """
%c0 = stablehlo.constant dense<0> : tensor<i32>
%0:2 = stablehlo.while(%i = %c0, %x = %a) : tensor<i32>, tensor<4xf32>
 cond {
  %n = stablehlo.constant dense<3> : tensor<i32>
  %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  stablehlo.return %lt : tensor<i1>
} do {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %j = stablehlo.add %i, %one : tensor<i32>
  %y = stablehlo.add %x, %x : tensor<4xf32>
  stablehlo.return %j, %y : tensor<i32>, tensor<4xf32>
}
return %0#1 : tensor<4xf32>"""
_RUNTIME_WHILE = _STATIC_WHILE.replace("%n = stablehlo.constant dense<3> : tensor<i32>",
                                       "%n = stablehlo.convert %s : (tensor<f32>) -> tensor<i32>")
_BRANCH = """
%0 = "stablehlo.{op}"(%p) ({{
  stablehlo.return %a : tensor<4xf32>
}}, {{
  %n = stablehlo.negate %a : tensor<4xf32>
  stablehlo.return %n : tensor<4xf32>
}}) : ({pt}) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_COMPOSITE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.composite "my.double" %a {decomposition = @double} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
_M = "tensor<2x3xf32>"
_DOT_GENERAL = """
%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({t}<2x3x{e}>, {t}<3x2x{e}>) -> {t}<2x2x{e}>
return %0 : {t}<2x2x{e}>"""


def _dot_general(e: str) -> str:
  t = f"tensor<2x3x{e}>, %b: tensor<3x2x{e}>"
  return module(f"%a: {t}", f"tensor<2x2x{e}>", _DOT_GENERAL.format(t="tensor", e=e))


def _token_program(op: str) -> str:
  uses = {
      "stablehlo.after_all": "%t = stablehlo.after_all : !stablehlo.token",
      "stablehlo.create_token": "%t = \"stablehlo.create_token\"() : () -> !stablehlo.token",
      "stablehlo.infeed": "%t0 = stablehlo.after_all : !stablehlo.token\n"
                          "%x, %t = \"stablehlo.infeed\"(%t0) {infeed_config = \"\"} : "
                          "(!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)",
      "stablehlo.outfeed": "%t0 = stablehlo.after_all : !stablehlo.token\n"
                           "%t = \"stablehlo.outfeed\"(%a, %t0) {outfeed_config = \"\"} : "
                           "(tensor<4xf32>, !stablehlo.token) -> !stablehlo.token",
      "stablehlo.send": "%t0 = stablehlo.after_all : !stablehlo.token\n"
                        "%t = \"stablehlo.send\"(%a, %t0) {channel_handle = "
                        "#stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true}"
                        " : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token",
      "stablehlo.recv": "%t0 = stablehlo.after_all : !stablehlo.token\n"
                        "%x, %t = \"stablehlo.recv\"(%t0) {channel_handle = "
                        "#stablehlo.channel_handle<handle = 1, type = 3>, is_host_transfer = true}"
                        " : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)",
  }[op]
  return module(f"%a: {F}", F, f"{uses}\nreturn %a : {F}")


# op -> programs. Their compile reports together must show every kind the report claims.
PROGRAMS: dict[str, list[str]] = {
    **{f"stablehlo.{n}": [unary(f"stablehlo.{n}")] for n in _FLOAT_UNARY},
    **{f"stablehlo.{n}": [unary(f"stablehlo.{n}", I)] for n in _INT_UNARY},
    "stablehlo.is_finite": [unary("stablehlo.is_finite", F, "tensor<4xi1>")],
    **{f"stablehlo.{n}": [binary(f"stablehlo.{n}")] for n in _FLOAT_BINARY},
    **{f"stablehlo.{n}": [binary(f"stablehlo.{n}", I)] for n in _INT_BINARY},
    "stablehlo.compare": [module(f"%a: {F}, %b: {F}", "tensor<4xi1>",
                                 "%0 = stablehlo.compare LT, %a, %b : (tensor<4xf32>, "
                                 "tensor<4xf32>) -> tensor<4xi1>\nreturn %0 : tensor<4xi1>")],
    "stablehlo.select": [module(f"%p: tensor<4xi1>, %a: {F}, %b: {F}", F,
                                f"%0 = stablehlo.select %p, %a, %b : tensor<4xi1>, {F}\n"
                                f"return %0 : {F}")],
    "stablehlo.clamp": [module(f"%l: {F}, %a: {F}, %h: {F}", F,
                               f"%0 = stablehlo.clamp %l, %a, %h : {F}\nreturn %0 : {F}")],
    "stablehlo.convert": [unary("stablehlo.convert", F, I)],
    "stablehlo.constant": [module(f"%a: {F}", F, f"%c = stablehlo.constant dense<[1.0, 2.0, "
                                  f"3.0, 4.0]> : {F}\n%0 = stablehlo.add %a, %c : {F}\n"
                                  f"return %0 : {F}")],
    "stablehlo.broadcast_in_dim": [module(f"%a: {F}, %b: tensor<3x4xf32>", "tensor<3x4xf32>",
                                          "%0 = stablehlo.broadcast_in_dim %a, dims = [1] : "
                                          f"({F}) -> tensor<3x4xf32>\n%1 = stablehlo.add %0, %b "
                                          ": tensor<3x4xf32>\nreturn %1 : tensor<3x4xf32>")],
    "stablehlo.reshape": [module(f"%a: {F}", "tensor<2x2xf32>",
                                 f"%0 = stablehlo.reshape %a : ({F}) -> tensor<2x2xf32>\n"
                                 "%1 = stablehlo.add %0, %0 : tensor<2x2xf32>\n"
                                 "return %1 : tensor<2x2xf32>")],
    "stablehlo.transpose": [
        # A view: the dot reads it through strides.
        module(f"%a: tensor<3x2xf32>, %b: tensor<3x2xf32>", "tensor<2x2xf32>",
               "%t = stablehlo.transpose %a, dims = [1, 0] : (tensor<3x2xf32>) -> "
               "tensor<2x3xf32>\n%0 = stablehlo.dot_general %t, %b, contracting_dims = [1] x [0] "
               ": (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>\n"
               "return %0 : tensor<2x2xf32>"),
        # Returned: a dense GpSimd copy.
        module(f"%a: {_M}", "tensor<3x2xf32>",
               f"%0 = stablehlo.transpose %a, dims = [1, 0] : ({_M}) -> tensor<3x2xf32>\n"
               "return %0 : tensor<3x2xf32>")],
    "stablehlo.dot_general": [_dot_general("f32"), _dot_general("i32")],
    "stablehlo.reduce": [module(f"%a: {F}", "tensor<f32>", _REDUCE.format(init="0.0", body="add",
                                                                        F=F)),
                         module(f"%a: {F}", "tensor<f32>", _REDUCE.format(init="1.0",
                                                                        body="multiply", F=F)),
                         module(f"%a: {F}", "tensor<i32>", _ARGMAX),
                         module(f"%a: {F}, %b: {F}", "tensor<f32>", _PAIR_SUM)],
    "stablehlo.return": [module(f"%a: {F}", "tensor<f32>", _REDUCE.format(init="0.0", body="add",
                                                                        F=F))],
    "stablehlo.optimization_barrier": [module(f"%a: {F}", F, "%0 = stablehlo.optimization_barrier"
                                              f" %a : {F}\n%1 = stablehlo.add %0, %0 : {F}\n"
                                              f"return %1 : {F}")],
    "stablehlo.bitcast_convert": [unary("stablehlo.bitcast_convert", F, I)],
    "stablehlo.slice": [module(f"%a: {F}", "tensor<2xf32>",
                               "%0 = stablehlo.slice %a [1:3] : (tensor<4xf32>) -> tensor<2xf32>"
                               "\nreturn %0 : tensor<2xf32>"),
                        module("%a: tensor<4x256xf32>", "tensor<2x200xf32>",
                               "%0 = stablehlo.slice %a [1:3, 8:208] : (tensor<4x256xf32>) -> "
                               "tensor<2x200xf32>\nreturn %0 : tensor<2x200xf32>")],
    "stablehlo.reverse": [module(f"%a: {F}", F, f"%0 = stablehlo.reverse %a, dims = [0] : {F}\n"
                                 f"return %0 : {F}")],
    "stablehlo.concatenate": [module(f"%a: {F}, %b: {F}", "tensor<8xf32>",
                                     "%0 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<4xf32>,"
                                     " tensor<4xf32>) -> tensor<8xf32>\nreturn %0 : tensor<8xf32>"),
                              module("%a: tensor<2x128xf32>, %b: tensor<2x128xf32>",
                                     "tensor<2x256xf32>",
                                     "%0 = stablehlo.concatenate %a, %b, dim = 1 : "
                                     "(tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x256xf32>"
                                     "\nreturn %0 : tensor<2x256xf32>")],
    "stablehlo.pad": [module(f"%a: {F}, %v: tensor<f32>", "tensor<7xf32>",
                             "%0 = stablehlo.pad %a, %v, low = [1], high = [2], interior = [0] : "
                             "(tensor<4xf32>, tensor<f32>) -> tensor<7xf32>\n"
                             "return %0 : tensor<7xf32>")],
    "stablehlo.iota": [module(f"%a: {F}", F, f"%0 = stablehlo.iota dim = 0 : {F}\n"
                              f"%1 = stablehlo.add %0, %a : {F}\nreturn %1 : {F}")],
    "stablehlo.sort": [module(f"%a: {F}", F, _SORT)],
    "stablehlo.gather": [module(f"%a: {F}, %i: tensor<2x1xi32>", "tensor<2xf32>", _GATHER)],
    "stablehlo.scatter": [module(f"%a: {F}, %i: tensor<2x1xi32>, %u: tensor<2xf32>", F,
                                 _SCATTER)],
    "stablehlo.dynamic_slice": [module(f"%a: {F}, %i: tensor<i32>", "tensor<2xf32>",
                                       "%0 = stablehlo.dynamic_slice %a, %i, sizes = [2] : "
                                       "(tensor<4xf32>, tensor<i32>) -> tensor<2xf32>\n"
                                       "return %0 : tensor<2xf32>")],
    "stablehlo.dynamic_update_slice": [module(f"%a: {F}, %u: tensor<2xf32>, %i: tensor<i32>", F,
                                              "%0 = stablehlo.dynamic_update_slice %a, %u, %i : "
                                              "(tensor<4xf32>, tensor<2xf32>, tensor<i32>) -> "
                                              f"{F}\nreturn %0 : {F}")],
    "stablehlo.composite": [_COMPOSITE],
    "stablehlo.while": [module(f"%a: {F}", F, _STATIC_WHILE),
                        module(f"%a: {F}, %s: tensor<f32>", F, _RUNTIME_WHILE)],
    "stablehlo.case": [module(f"%p: tensor<i32>, %a: {F}", F,
                              _BRANCH.format(op="case", pt="tensor<i32>"))],
    "stablehlo.if": [module(f"%p: tensor<i1>, %a: {F}", F,
                            _BRANCH.format(op="if", pt="tensor<i1>"))],
}

_F22 = "tensor<2x2xf32>"
# A traced kernel (jax_trn.nki's payload) that copies its f32[4] input to its output by DMA.
_COPY_KERNEL = KernelProgram(
    "copy", [KernelTensor(INPUT, 0, DType.F32, (4,)), KernelTensor(OUTPUT, 0, DType.F32, (4,))],
    [KernelInstruction("dma_copy", {"dst": HbmAP(1, 0, ((1, 4),)), "src": HbmAP(0, 0, ((1, 4),))},
                       0)], [""]).encode()
_CONV = """
%0 = stablehlo.convolution(%a, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x1xf32>, tensor<2x1x1xf32>) -> tensor<1x3x1xf32>
return %0 : tensor<1x3x1xf32>"""
_REDUCE_WINDOW = """
%z = stablehlo.constant dense<0.0> : tensor<f32>
%0 = "stablehlo.reduce_window"(%a, %z) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %s = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %s : tensor<f32>
}) {window_dimensions = array<i64: 2>} : (tensor<4xf32>, tensor<f32>) -> tensor<3xf32>
return %0 : tensor<3xf32>"""
_SELECT_AND_SCATTER = """
%z = stablehlo.constant dense<0.0> : tensor<f32>
%0 = "stablehlo.select_and_scatter"(%a, %s, %z) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %ge = stablehlo.compare GE, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
  stablehlo.return %ge : tensor<i1>
}, {
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %sum = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %sum : tensor<f32>
}) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4xf32>, tensor<2xf32>, tensor<f32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_MAP = """
%0 = "stablehlo.map"(%a, %b) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %s = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %s : tensor<f32>
}) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_ALL_REDUCE = """
%0 = "stablehlo.all_reduce"(%a) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %s = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %s : tensor<f32>
}) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_REDUCE_SCATTER = """
%0 = "stablehlo.reduce_scatter"(%a) ({
^bb0(%x: tensor<f32>, %y: tensor<f32>):
  %s = stablehlo.add %x, %y : tensor<f32>
  stablehlo.return %s : tensor<f32>
}) {replica_groups = dense<[[0]]> : tensor<1x1xi64>, scatter_dimension = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
return %0 : tensor<4xf32>"""
_Q = "tensor<4x!quant.uniform<i8:f32, 1.000000e+00>>"
_QUANTIZE = module(f"%a: {F}", F, f"%0 = stablehlo.uniform_quantize %a : ({F}) -> {_Q}\n"
                   f"%1 = stablehlo.uniform_dequantize %0 : ({_Q}) -> {F}\nreturn %1 : {F}")
_BUNDLE = f"!stablehlo.async_bundle<tuple<{F}>, {F}>"
_ASYNC = f"""func.func @main(%a: {F}) -> {F} {{
%0 = "stablehlo.async_start"(%a) {{called_computation = @f, execution_thread = "main"}} : ({F}) -> {_BUNDLE}
%1 = "stablehlo.async_done"(%0) {{called_computation = @f, execution_thread = "main"}} : ({_BUNDLE}) -> {F}
return %1 : {F}
}}
func.func private @f(%x: {F}) -> {F} {{
return %x : {F}
}}"""
_BN = "%s: tensor<2xf32>, %o: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>, %x: tensor<4x2xf32>"
_RG = "replica_groups = dense<[[0]]> : tensor<1x1xi64>"


def _ret(op: str, args: str, operands: str, types: str, result: str, attrs: str = "",
         n_results: int = 1) -> str:
  """A module whose body is one generic-form `op` returning its first result."""
  results = ", ".join([result] * n_results) if n_results > 1 else result
  name = "%0:" + str(n_results) if n_results > 1 else "%0"
  first = "%0#0" if n_results > 1 else "%0"
  attr_text = f" {{{attrs}}}" if attrs else ""
  return module(args, result, f"{name} = \"{op}\"({operands}){attr_text} : ({types}) -> "
                              f"({results})\nreturn {first} : {result}")


PROGRAMS.update({
    "stablehlo.convolution": [module("%a: tensor<1x4x1xf32>, %w: tensor<2x1x1xf32>",
                                     "tensor<1x3x1xf32>", _CONV),
                              module("%a: tensor<1x4x1xi32>, %w: tensor<2x1x1xi32>",
                                     "tensor<1x3x1xi32>",
                                     _CONV.replace("f32", "i32"))],
    "stablehlo.reduce_window": [module(f"%a: {F}", "tensor<3xf32>", _REDUCE_WINDOW)],
    "stablehlo.select_and_scatter": [module(f"%a: {F}, %s: tensor<2xf32>", F,
                                            _SELECT_AND_SCATTER)],
    "stablehlo.map": [module(f"%a: {F}, %b: {F}", F, _MAP)],
    "stablehlo.all_reduce": [module(f"%a: {F}", F, _ALL_REDUCE)],
    "stablehlo.reduce_scatter": [module(f"%a: {F}", F, _REDUCE_SCATTER)],
    "stablehlo.all_gather": [_ret("stablehlo.all_gather", f"%a: {F}", "%a", F, F,
                                  f"all_gather_dim = 0 : i64, {_RG}")],
    "stablehlo.all_to_all": [_ret("stablehlo.all_to_all", f"%a: {F}", "%a", F, F,
                                  f"split_dimension = 0 : i64, concat_dimension = 0 : i64, "
                                  f"split_count = 1 : i64, {_RG}")],
    "stablehlo.collective_broadcast": [_ret("stablehlo.collective_broadcast", f"%a: {F}", "%a",
                                            F, F, _RG)],
    "stablehlo.collective_permute": [_ret("stablehlo.collective_permute", f"%a: {F}", "%a", F, F,
                                          "source_target_pairs = dense<[[0, 0]]> : "
                                          "tensor<1x2xi64>")],
    "stablehlo.cross-replica-sum": [_ret("stablehlo.cross-replica-sum", f"%a: {F}", "%a", F, F,
                                         _RG)],
    "stablehlo.partition_id": [_ret("stablehlo.partition_id", "", "", "", "tensor<ui32>")],
    "stablehlo.replica_id": [_ret("stablehlo.replica_id", "", "", "", "tensor<ui32>")],
    "stablehlo.batch_norm_inference": [_ret("stablehlo.batch_norm_inference", _BN,
                                            "%x, %s, %o, %m, %v",
                                            "tensor<4x2xf32>, " + ", ".join(["tensor<2xf32>"] * 4),
                                            "tensor<4x2xf32>",
                                            "epsilon = 1.0e-3 : f32, feature_index = 1 : i64")],
    "stablehlo.batch_norm_training": [module(
        "%x: tensor<4x2xf32>, %s: tensor<2xf32>, %o: tensor<2xf32>", "tensor<4x2xf32>",
        "%0:3 = \"stablehlo.batch_norm_training\"(%x, %s, %o) {epsilon = 1.0e-3 : f32, "
        "feature_index = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>) -> "
        "(tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)\nreturn %0#0 : tensor<4x2xf32>")],
    "stablehlo.batch_norm_grad": [module(
        "%x: tensor<4x2xf32>, %s: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>, "
        "%g: tensor<4x2xf32>", "tensor<4x2xf32>",
        "%0:3 = \"stablehlo.batch_norm_grad\"(%x, %s, %m, %v, %g) {epsilon = 1.0e-3 : f32, "
        "feature_index = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, "
        "tensor<2xf32>, tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)\n"
        "return %0#0 : tensor<4x2xf32>")],
    "stablehlo.cholesky": [_ret("stablehlo.cholesky", f"%a: {_F22}", "%a", _F22, _F22,
                                "lower = true")],
    "stablehlo.triangular_solve": [_ret("stablehlo.triangular_solve", f"%a: {_F22}, %b: {_F22}",
                                        "%a, %b", f"{_F22}, {_F22}", _F22,
                                        "left_side = true, lower = true, unit_diagonal = false, "
                                        "transpose_a = #stablehlo<transpose NO_TRANSPOSE>")],
    "stablehlo.custom_call": [_ret("stablehlo.custom_call", f"%a: {F}", "%a", F, F,
                                   "call_target_name = \"my_kernel\""),
                              _ret("stablehlo.custom_call", f"%a: {F}", "%a", F, F,
                                   "call_target_name = \"trn_kernel\", mhlo.backend_config = "
                                   f"{{kernel = \"{_COPY_KERNEL}\"}}"),
                              _ret("stablehlo.custom_call", f"%a: {F}", "%a", F, F,
                                   "call_target_name = \"trn_host_callback\", "
                                   "mhlo.backend_config = {callback = 1 : ui64}")],
    "stablehlo.rng_bit_generator": [module(
        "%s: tensor<2xui64>", "tensor<4xui32>",
        "%0:2 = \"stablehlo.rng_bit_generator\"(%s) {rng_algorithm = #stablehlo<rng_algorithm "
        "THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)\n"
        "return %0#1 : tensor<4xui32>")],
    "stablehlo.rng": [module("%l: tensor<f32>, %h: tensor<f32>", F,
                             "%shape = stablehlo.constant dense<4> : tensor<1xi64>\n"
                             "%0 = \"stablehlo.rng\"(%l, %h, %shape) {rng_distribution = "
                             "#stablehlo<rng_distribution UNIFORM>} : (tensor<f32>, tensor<f32>, "
                             f"tensor<1xi64>) -> {F}\nreturn %0 : {F}")],
    "stablehlo.reduce_precision": [_ret("stablehlo.reduce_precision", f"%a: {F}", "%a", F, F,
                                        "exponent_bits = 5 : i32, mantissa_bits = 10 : i32")],
    "stablehlo.real": [unary("stablehlo.real")],
    "stablehlo.imag": [unary("stablehlo.imag")],
    "stablehlo.complex": [module(f"%a: {F}, %b: {F}", F,
                                 "%0 = stablehlo.complex %a, %b : tensor<4xcomplex<f32>>\n"
                                 "%1 = stablehlo.real %0 : (tensor<4xcomplex<f32>>) -> "
                                 f"{F}\nreturn %1 : {F}")],
    "stablehlo.fft": [module("%a: tensor<4xf32>", "tensor<3xf32>",
                             "%0 = stablehlo.fft %a, type = RFFT, length = [4] : (tensor<4xf32>) "
                             "-> tensor<3xcomplex<f32>>\n%1 = stablehlo.real %0 : "
                             "(tensor<3xcomplex<f32>>) -> tensor<3xf32>\n"
                             "return %1 : tensor<3xf32>")],
    "stablehlo.broadcast": [_ret("stablehlo.broadcast", f"%a: {F}", "%a", F, "tensor<2x4xf32>",
                                 "broadcast_sizes = array<i64: 2>")],
    "stablehlo.dot": [_ret("stablehlo.dot", f"%a: {_M}, %b: tensor<3x2xf32>", "%a, %b",
                           f"{_M}, tensor<3x2xf32>", _F22)],
    "stablehlo.einsum": [_ret("stablehlo.einsum", f"%a: {_M}, %b: tensor<3x2xf32>", "%a, %b",
                              f"{_M}, tensor<3x2xf32>", _F22,
                              "einsum_config = \"ab,bc->ac\"")],
    "stablehlo.unary_einsum": [_ret("stablehlo.unary_einsum", f"%a: {_M}", "%a", _M,
                                    "tensor<3x2xf32>", "einsum_config = \"ab->ba\"")],
    "stablehlo.torch_index_select": [_ret("stablehlo.torch_index_select",
                                          f"%a: {F}, %i: tensor<2xi32>", "%a, %i",
                                          f"{F}, tensor<2xi32>", "tensor<2xf32>",
                                          "dim = 0 : i64, batch_dims = 0 : i64")],
    "stablehlo.tuple": [module(f"%a: {F}", F, "%t = stablehlo.tuple %a : tuple<tensor<4xf32>>\n"
                               "%0 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<4xf32>>) "
                               f"-> {F}\nreturn %0 : {F}")],
    "stablehlo.get_tuple_element": [module(f"%t: tuple<{F}>", F,
                                           "%0 = stablehlo.get_tuple_element %t[0] : "
                                           f"(tuple<{F}>) -> {F}\nreturn %0 : {F}")],
    "stablehlo.get_dimension_size": [_ret("stablehlo.get_dimension_size", f"%a: {F}", "%a", F,
                                          "tensor<i32>", "dimension = 0 : i64")],
    "stablehlo.set_dimension_size": [_ret("stablehlo.set_dimension_size",
                                          f"%a: {F}, %n: tensor<i32>", "%a, %n",
                                          f"{F}, tensor<i32>", F, "dimension = 0 : i64")],
    "stablehlo.dynamic_broadcast_in_dim": [_ret("stablehlo.dynamic_broadcast_in_dim",
                                                f"%a: {F}, %s: tensor<2xi64>", "%a, %s",
                                                f"{F}, tensor<2xi64>", "tensor<3x4xf32>",
                                                "broadcast_dimensions = array<i64: 1>")],
    "stablehlo.dynamic_iota": [_ret("stablehlo.dynamic_iota", "%s: tensor<1xi64>", "%s",
                                    "tensor<1xi64>", F, "iota_dimension = 0 : i64")],
    "stablehlo.dynamic_reshape": [_ret("stablehlo.dynamic_reshape",
                                       f"%a: {F}, %s: tensor<2xi64>", "%a, %s",
                                       f"{F}, tensor<2xi64>", _F22)],
    "stablehlo.dynamic_pad": [_ret("stablehlo.dynamic_pad",
                                   f"%a: {F}, %v: tensor<f32>, %l: tensor<1xi64>, "
                                   "%h: tensor<1xi64>, %i: tensor<1xi64>", "%a, %v, %l, %h, %i",
                                   f"{F}, tensor<f32>, tensor<1xi64>, tensor<1xi64>, "
                                   "tensor<1xi64>", "tensor<6xf32>")],
    "stablehlo.real_dynamic_slice": [_ret("stablehlo.real_dynamic_slice",
                                          f"%a: {F}, %s: tensor<1xi64>, %l: tensor<1xi64>, "
                                          "%t: tensor<1xi64>", "%a, %s, %l, %t",
                                          f"{F}, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>",
                                          "tensor<2xf32>")],
    "stablehlo.dynamic_gather": [_ret("stablehlo.dynamic_gather",
                                      f"%a: {F}, %i: tensor<2x1xi32>, %z: tensor<1xi32>",
                                      "%a, %i, %z", f"{F}, tensor<2x1xi32>, tensor<1xi32>",
                                      "tensor<2xf32>",
                                      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims"
                                      " = [0], start_index_map = [0], index_vector_dim = 1>")],
    "stablehlo.dynamic_conv": [_ret("stablehlo.dynamic_conv",
                                    "%a: tensor<1x4x1xf32>, %w: tensor<2x1x1xf32>, "
                                    "%p: tensor<1x2xi64>", "%a, %w, %p",
                                    "tensor<1x4x1xf32>, tensor<2x1x1xf32>, tensor<1x2xi64>",
                                    "tensor<1x3x1xf32>",
                                    "dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->"
                                    "[b, 0, f]>, batch_group_count = 1 : i64, "
                                    "feature_group_count = 1 : i64")],
    "stablehlo.uniform_quantize": [_QUANTIZE],
    "stablehlo.uniform_dequantize": [_QUANTIZE],
    "stablehlo.async_start": [_ASYNC],
    "stablehlo.async_done": [_ASYNC],
    **{op: [_token_program(op)] for op in ("stablehlo.after_all", "stablehlo.create_token",
                                           "stablehlo.infeed", "stablehlo.outfeed",
                                           "stablehlo.send", "stablehlo.recv")},
})

# Ops whose programs the importer rejects by a type before it reaches the op itself: the
# CompileError names that type (limitations.py says why) instead of the op.
NAMED_BY_TYPE = {
    "stablehlo.get_tuple_element": "tuple<",
    "stablehlo.async_start": "async_bundle",
    "stablehlo.async_done": "async_bundle",
    "stablehlo.uniform_quantize": "quant.uniform",
    "stablehlo.uniform_dequantize": "quant.uniform",
}
# Programs that exercise a limitation of an op rather than its supported forms: (op, index) ->
# the limitations.py form tag, so the case runs under limitations.marks().
LIMITED = {("stablehlo.custom_call", 0): "foreign-custom-call"}

ROWS = {row.op: row for row in coverage.table()}


def _compile(text: str) -> dict[str, dict[str, int]]:
  compilation.compile_text(text)
  return compilation.last_report().summary()


def test_every_op_has_a_program():
  missing = sorted(op for op in ROWS if not PROGRAMS.get(op))
  assert not missing, f"add a program for {missing} to PROGRAMS in {__file__}"
  unknown = sorted(set(PROGRAMS) - set(ROWS))
  assert not unknown, f"PROGRAMS names ops the dialect does not have: {unknown}"


def _cases():
  for op, programs in sorted(PROGRAMS.items()):
    for i, text in enumerate(programs):
      form = LIMITED.get((op, i))
      yield limitations.param(op, op, i, text, form=form, id=f"{op}-{i}") if form else \
          pytest.param(op, i, text, id=f"{op}-{i}")


@pytest.mark.parametrize("op,index,text", list(_cases()))
def test_program(op, index, text):
  """Each program compiles to the kinds its op is claimed to have, or fails naming the op."""
  row = ROWS[op]
  if row.status == coverage.UNSUPPORTED:
    with pytest.raises(CompileError) as error:
      _compile(text)
    named = NAMED_BY_TYPE.get(op, op)
    assert named in str(error.value), f"the CompileError does not name {named}: {error.value}"
    return
  kinds = _compile(text).get(op, {})
  assert set(kinds) <= set(row.kinds) | {"empty"}, (
      f"{op} lowered as {kinds}; the report claims only {row.kinds}")
  if not row.kinds:  # rewritten: the op is gone before lowering
    assert not kinds, f"{op} should be rewritten away but was lowered: {kinds}"


@pytest.mark.parametrize("op", sorted(op for op, row in ROWS.items() if row.kinds))
def test_every_claimed_kind_is_shown(op):
  """The programs of `op` together show every kind the report claims for it."""
  shown = set()
  for i, text in enumerate(PROGRAMS[op]):
    if (op, i) in LIMITED:
      continue
    shown |= set(_compile(text).get(op, {}))
  assert set(ROWS[op].kinds) <= shown, (
      f"the report claims {op} lowers as {ROWS[op].kinds} but its programs showed {shown}; add "
      f"a program for the missing kind to PROGRAMS in {__file__}")


@pytest.mark.parametrize("op", sorted(op for op, row in ROWS.items()
                                      if row.status == coverage.REWRITTEN_KIND))
def test_rewritten_op_compiles_without_it(op):
  compiled = []
  for i, text in enumerate(PROGRAMS[op]):
    if (op, i) in LIMITED:
      continue
    compiled.append(op not in _compile(text))
  assert compiled and all(compiled)


@pytest.mark.parametrize("dtype", ["float64"])
def test_all_ops_type_limitation(dtype):
  """The ALL_OPS dtype limitations hold: float64 inside a program fails, naming the first op."""
  [limitation] = [lim for lim in limitations.find("stablehlo.add", dtype)]
  assert limitation.kind == limitations.UNSUPPORTED
  d = "tensor<4xf64>"
  with pytest.raises(CompileError, match="stablehlo.convert.*float64"):
    _compile(module(f"%a: {F}", F, f"%0 = stablehlo.convert %a : ({F}) -> {d}\n"
                    f"%1 = stablehlo.add %0, %0 : {d}\n%2 = stablehlo.convert %1 : ({d}) -> {F}\n"
                    f"return %2 : {F}"))


def test_integer_dot_limitation_is_gpsimd():
  [limitation] = limitations.find("stablehlo.dot_general", "int32")
  assert limitation.kind == limitations.GPSIMD
  assert _compile(_dot_general("i32"))["stablehlo.dot_general"] == {"gpsimd": 1}
