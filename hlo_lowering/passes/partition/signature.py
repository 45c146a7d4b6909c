"""The program text a multi-core executable reports (PJRT_Executable_OptimizedProgram): a
StableHLO module with the per-core signature (each argument's and result's shard, as XLA's
partitioned module has it), each one's HLO sharding, and `mhlo.spmd_parameters_shardings` /
`mhlo.spmd_output_sharding`, which XLA's MLIR-to-HLO conversion turns into the HloModuleProto
fields JAX reads the output shardings from. Its body is one custom_call standing for the
partitioned NeuronCore program (the program itself is not StableHLO)."""

from __future__ import annotations

from hlo_lowering.ir import TensorType
from hlo_lowering.program import DType

PROGRAM_TARGET = "trn.neuroncore_program"


def _element(dtype: DType) -> str:
  if dtype == DType.PRED:
    return "i1"
  name = dtype.name.lower()
  if name[0] in "su" and name[1:].isdigit():
    return ("i" if name[0] == "s" else "ui") + name[1:]
  return {"f8e5m2": "f8E5M2", "f8e4m3fn": "f8E4M3FN"}.get(name, name)


def _type(t: TensorType) -> str:
  dims = "x".join(str(d) for d in t.shape)
  return f"tensor<{dims + 'x' if dims else ''}{_element(t.dtype)}>"


def _quoted(text: str) -> str:
  return '"' + text.replace('"', '\\"') + '"'


def module_text(name: str, args: list[TensorType], results: list[TensorType],
                parameter_shardings: list[str], output_shardings: list[str],
                num_partitions: int) -> str:
  # No results: XLA's empty tuple output, which it gives a replicated sharding.
  output = (output_shardings[0] if len(output_shardings) == 1
            else "{" + ", ".join(output_shardings) + "}" if output_shardings else "{replicated}")
  attrs = (f"mhlo.num_partitions = {num_partitions} : i32, mhlo.num_replicas = 1 : i32, "
           f"mhlo.spmd_output_sharding = {_quoted(output)}, mhlo.spmd_parameters_shardings = ["
           + ", ".join(_quoted(s) for s in parameter_shardings) + "]")
  params = ", ".join(f"%arg{i}: {_type(t)} {{mhlo.sharding = {_quoted(s)}}}"
                     for i, (t, s) in enumerate(zip(args, parameter_shardings)))
  outs = ", ".join(f"{_type(t)} {{mhlo.sharding = {_quoted(s)}}}"
                   for t, s in zip(results, output_shardings))
  operands = ", ".join(f"%arg{i}" for i in range(len(args)))
  in_types = ", ".join(_type(t) for t in args)
  out_types = ", ".join(_type(t) for t in results)
  call = (f'    %0:{len(results)} = stablehlo.custom_call @{PROGRAM_TARGET}({operands}) '
          f"{{has_side_effect = true}} : ({in_types}) -> ({out_types})\n")
  returned = ", ".join(f"%0#{i}" for i in range(len(results)))
  if not results:
    call, returned = (f'    stablehlo.custom_call @{PROGRAM_TARGET}({operands}) '
                      f"{{has_side_effect = true}} : ({in_types}) -> ()\n"), ""
  ret = f"    return {returned} : {out_types}\n" if results else "    return\n"
  return (f"module @{name} attributes {{{attrs}}} {{\n"
          f"  func.func public @main({params}) -> ({outs}) {{\n{call}{ret}  }}\n}}\n")
