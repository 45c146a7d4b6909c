"""Generates hlo_lowering/program/isa_table.py from pjrt_plugin/sim/isa.def, the one definition
of the program format's numbered vocabularies (opcodes, ALU ops, dtypes, memories, tensor and
operand kinds, streams, format constants). Run `python -m hlo_lowering.gen_isa` after editing
isa.def; tests/test_isa_table.py fails while the committed isa_table.py is stale. (Outside
hlo_lowering.program, which cannot be imported while its table is being regenerated.)"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEF_FILE = ROOT / "pjrt_plugin" / "sim" / "isa.def"
OUTPUT = ROOT / "hlo_lowering" / "program" / "isa_table.py"

# isa.def's row macros -> the Python table each becomes.
TABLES = {
    "TRN_DTYPE": "DTYPES",
    "TRN_ALU_OP": "ALU_OPS",
    "TRN_OPCODE": "OPCODES",
    "TRN_CONTROL_OP": "CONTROL_OPS",
    "TRN_MEMORY": "MEMORIES",
    "TRN_TENSOR_KIND": "TENSOR_KINDS",
    "TRN_ENDPOINT_KIND": "ENDPOINT_KINDS",
    "TRN_SCALAR_KIND": "SCALAR_KINDS",
    "TRN_ROW_SUM": "ROW_SUMS",
    "TRN_ENGINE_STREAM": "ENGINE_STREAMS",
}
CONSTANT = "TRN_ISA_CONSTANT"

_DEFINE = re.compile(r"^#define (TRN_\w+)\(([^)]*)\)\s*$")
_ROW = re.compile(r"^(TRN_\w+)\(([^)]*)\)\s*$")


def _value(text: str):
  return int(text) if re.fullmatch(r"-?\d+", text) else text


def parse(text: str) -> tuple[dict, dict]:
  """(tables, constants): tables[name] = {PYTHON_NAME: {"code": ..., column: value}}."""
  columns, tables, constants = {}, {name: {} for name in TABLES.values()}, {}
  for line in text.splitlines():
    line = line.strip()
    if m := _DEFINE.match(line):
      columns[m[1]] = [c.strip() for c in m[2].split(",")]
    elif m := _ROW.match(line):
      macro, args = m[1], [a.strip() for a in m[2].split(",")]
      if macro == CONSTANT:
        constants[args[1]] = _value(args[2])
        continue
      params = columns[macro]
      row = dict(zip(params, (_value(a) for a in args)))
      if macro == "TRN_ENGINE_STREAM":
        name = row.pop("NAME")
      else:
        row.pop("Camel")
        name = row.pop("snake").upper()
      tables[TABLES[macro]][name] = row
  return tables, constants


def render(text: str) -> str:
  tables, constants = parse(text)
  out = [f'"""GENERATED from pjrt_plugin/sim/isa.def by `python -m hlo_lowering.gen_isa`:',
         'do not edit. The program format\'s numbered vocabularies; enums.py builds its IntEnums',
         'from them."""', ""]
  for name, rows in tables.items():
    out.append(f"{name} = {{")
    out += [f"    {key!r}: {row!r}," for key, row in rows.items()]
    out += ["}", ""]
  for name, value in constants.items():
    out.append(f"{name} = {value!r}")
  return "\n".join(out) + "\n"


def main() -> None:
  OUTPUT.write_text(render(DEF_FILE.read_text()))
  print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
  main()
