"""alias-donations: a donated parameter and the output that may reuse its buffer become one HBM
tensor, read and written in place, where the program's order makes that safe.

`jax.jit(donate_argnums=...)` marks argument p with `tf.aliasing_output = o`: output o may reuse
p's buffer, so a training step updates its parameters and optimizer state in place instead of
holding two copies in HBM. In place is right when no instruction reads an element of p after an
earlier instruction (in program order) wrote that element of o: every read then sees p's
original value, and insert-semaphores, which orders conflicting accesses of one tensor as program
order does, keeps it so on the engines. A pair is left as two tensors (correct, not in place) when
that does not hold, when a write of o can reach a read of p through the block graph's back edges
(a loop whose next iteration would read what this one wrote), or when their dtype or shape
differ. The test is exact: it follows every element each access pattern addresses (a counted
loop's at every iteration), in program order. The shares of an op split between the physical
cores (`Instruction.part`) run concurrently, not in program order: a share's read of an element
that another share of the same split writes is unsafe wherever it comes.

Requires: codegen (builder.output_aliases: parameter number -> output number; the HBM tensor
table final, every output tensor present).
Ensures: each accepted pair is one tensor of kind DONATED_PARAMETER (its parameter number, and
`output` = the output number) that every access pattern of either names; the output's tensor is
gone from the table (the tensors after it move down by one); every other pair is untouched; the
compile report lists the accepted parameter numbers (`report.donated_parameters`).
Runs before: plan-memory (the first back-end stage).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hlo_lowering.program import ControlOp, Opcode, ProgramBuilder, TensorKind
from hlo_lowering.program.instructions import OPERAND_LAYOUT, hbm_accesses
from hlo_lowering.program.operands import HbmAP
from hlo_lowering.report import CompileReport


def _successors(builder: ProgramBuilder, block: int) -> list[int]:
  exit_ = builder.blocks[block].exit
  return [] if exit_.op == ControlOp.END else list(exit_.targets)


def _reachable_from(builder: ProgramBuilder, block: int) -> set[int]:
  """Blocks reachable from `block` through at least one exit edge."""
  seen, stack = set(), _successors(builder, block)
  while stack:
    b = stack.pop()
    if b not in seen:
      seen.add(b)
      stack.extend(_successors(builder, b))
  return seen


def _elements(ap: HbmAP | None, size: int) -> np.ndarray | slice:
  """The flat element indices an access pattern addresses (None: the whole tensor)."""
  if ap is None:
    return slice(0, size)
  index = np.array([ap.offset], dtype=np.int64)
  for stride, count in ap.dims:
    index = (index[:, None] + stride * np.arange(count, dtype=np.int64)).ravel()
  return index


def _in_place_is_safe(builder: ProgramBuilder, parameter: int, output: int) -> bool:
  size = math.prod(builder.tensors[output].shape)
  written = np.zeros(size, dtype=bool)  # elements of `output` written so far
  write_blocks, read_blocks = set(), set()
  # (split, share) -> elements of `parameter` it reads, of `output` it writes
  share_reads, share_writes = {}, {}

  def mark(shares: dict, part, ap) -> None:
    if part is not None:
      shares.setdefault(part, np.zeros(size, dtype=bool))[_elements(ap, size)] = True

  def touches(inst) -> bool:
    return any(t in (parameter, output) for t, _ in sum(hbm_accesses(inst), []))

  # Blocks are numbered in program order (codegen creates each as it starts emitting into it).
  for b, block in enumerate(builder.blocks):
    for inst in block.executed(touches):
      reads, writes = hbm_accesses(inst)
      for tensor, ap in reads:
        if tensor == parameter:
          if written[_elements(ap, size)].any():
            return False
          read_blocks.add(b)
          mark(share_reads, inst.part, ap)
      for tensor, ap in writes:
        if tensor == output:
          written[_elements(ap, size)] = True
          write_blocks.add(b)
          mark(share_writes, inst.part, ap)
    selector = block.exit.selector  # a branch's selector is read when the block ends
    if isinstance(selector, HbmAP) and selector.tensor == parameter:
      read_blocks.add(b)
  for (split, share), reads in share_reads.items():
    for (other_split, other), writes in share_writes.items():
      if split == other_split and share != other and (reads & writes).any():
        return False
  # A read that a write can reach again through the block graph (a loop's next iteration, or
  # an earlier block entered again) would read what the write left.
  return not any(r <= w for w in write_blocks for r in _reachable_from(builder, w) & read_blocks)


def _renamed(value, mapping):
  if isinstance(value, HbmAP):
    return dataclasses.replace(value, tensor=mapping(value.tensor))
  if isinstance(value, list):
    return [_renamed(v, mapping) for v in value]
  return value


def _merge(builder: ProgramBuilder, parameter: int, output: int) -> None:
  """Every access of tensor `output` names `parameter`; `output` leaves the table."""
  def mapping(tensor: int) -> int:
    if tensor == output:
      tensor = parameter
    return tensor - 1 if tensor > output else tensor

  for inst in builder.instructions:
    for name, kind in OPERAND_LAYOUT[inst.opcode]:
      if kind in ("hbm", "hbm_list", "endpoint"):
        inst.operands[name] = _renamed(inst.operands[name], mapping)
      elif inst.opcode == Opcode.GP_BITCAST:  # its dst and src are tensor numbers
        inst.operands[name] = mapping(inst.operands[name])
  for block in builder.blocks:
    block.exit.selector = _renamed(block.exit.selector, mapping)
  out = builder.tensors.pop(output)
  param = builder.tensors[parameter - (parameter > output)]
  param.kind, param.output = TensorKind.DONATED_PARAMETER, out.index


def run(builder: ProgramBuilder, target_spec: dict, report: CompileReport) -> None:
  donated = []
  for p_number, o_number in sorted(builder.output_aliases.items()):
    tensors = builder.tensors
    p = next((i for i, t in enumerate(tensors)
              if t.kind == TensorKind.PARAMETER and t.index == p_number), None)
    o = next((i for i, t in enumerate(tensors)
              if t.kind == TensorKind.OUTPUT and t.index == o_number), None)
    if p is None or o is None:
      continue
    if (tensors[p].dtype, tuple(tensors[p].shape)) != (tensors[o].dtype, tuple(tensors[o].shape)):
      continue
    if _in_place_is_safe(builder, p, o):
      _merge(builder, p, o)
      donated.append(p_number)
  report.donated_parameters = donated
