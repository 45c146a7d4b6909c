"""HLO's legacy dynamic-slice / dynamic-update-slice form, with all start indices in one rank-1
vector, rewritten to StableHLO's one scalar per dimension.

XLA still accepts the vector form and torch_xla emits it (randperm's Fisher-Yates shuffle);
hlo_to_stablehlo converts it op for op, into a stablehlo.dynamic_slice that does not verify.
The rewrite runs on the module's generic-form text (as `xla_computation_to_mlir_module` prints
it, unverified), before MLIR parses it: index i of the vector becomes
`reshape(slice(v, [i], [i + 1]))`, new ops with the original op's location.
"""

from __future__ import annotations

import re

_OP = re.compile(
    r'^(?P<indent>\s*)(?P<result>%\S+) = "stablehlo\.(?P<name>dynamic_slice|dynamic_update_slice)"'
    r'\((?P<operands>[^)]*)\)(?P<middle>.*?) : \((?P<types>[^)]*)\) -> (?P<tail>.*)$')
_VECTOR = re.compile(r"^tensor<(\d+)x(\w+)>$")


def _rewrite(match: re.Match) -> str | None:
  """The ops that replace one matched op, or None when its indices are already scalars."""
  operands = [o.strip() for o in match["operands"].split(",")]
  types = [t.strip() for t in match["types"].split(",")]
  first_index = 1 if match["name"] == "dynamic_slice" else 2
  if len(operands) != first_index + 1 or len(types) != len(operands):
    return None
  vector = _VECTOR.match(types[first_index])
  if vector is None:
    return None
  count, element = int(vector[1]), vector[2]
  loc = re.search(r"loc\([^()]*\)\s*$", match["tail"])
  loc_text = f" {loc[0]}" if loc else ""
  indent, result = match["indent"], match["result"].lstrip("%")
  lines, scalars = [], []
  for i in range(count):
    piece, scalar = f"%trn_index_{result}_{i}_slice", f"%trn_index_{result}_{i}"
    lines.append(f'{indent}{piece} = "stablehlo.slice"({operands[first_index]}) '
                 f'<{{limit_indices = array<i64: {i + 1}>, start_indices = array<i64: {i}>, '
                 f'strides = array<i64: 1>}}> : ({types[first_index]}) -> tensor<1x{element}>'
                 f'{loc_text}')
    lines.append(f'{indent}{scalar} = "stablehlo.reshape"({piece}) : (tensor<1x{element}>) -> '
                 f'tensor<{element}>{loc_text}')
    scalars.append(scalar)
  new_operands = ", ".join(operands[:first_index] + scalars)
  new_types = ", ".join(types[:first_index] + [f"tensor<{element}>"] * count)
  lines.append(f'{indent}{match["result"]} = "stablehlo.{match["name"]}"({new_operands})'
               f'{match["middle"]} : ({new_types}) -> {match["tail"]}')
  return "\n".join(lines)


def scalar_indices(generic_text: str) -> tuple[str, int]:
  """`generic_text` with every vector-indexed dynamic (update) slice rewritten, and how many."""
  out, rewritten = [], 0
  for line in generic_text.splitlines():
    match = _OP.match(line)
    replacement = _rewrite(match) if match else None
    if replacement is None:
      out.append(line)
    else:
      out.append(replacement)
      rewritten += 1
  return "\n".join(out), rewritten
