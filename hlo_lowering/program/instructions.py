"""The in-memory instruction, the operand layout of every opcode (one table that the writer and
the reader both follow), and the memory each instruction reads and writes (for the back end's
insert-semaphores stage and the verifier)."""

import dataclasses

from .enums import MATMUL_START, ControlOp, DType, Opcode
from .operands import HbmAP, TileAP


# The s8/u8 view of an s4/u4 tensor -> the table's type.
_NIBBLE_TYPES = {DType.S8: DType.S4, DType.U8: DType.U4}
WIDE_NIBBLE_TYPES = {v: k for k, v in _NIBBLE_TYPES.items()}


@dataclasses.dataclass
class Tensor:
  name: str
  kind: int  # TensorKind
  index: int
  dtype: int  # DType
  shape: tuple
  data: bytes = b""
  output: int = 0  # a donated parameter: the number of the output that reuses its buffer
  # A parameter or output bound to a c64 [d...] buffer: the table declares it c64 [d...]; here,
  # as to every access pattern, it is f32 [d..., 2] (interleaved real, imaginary).
  complex_pairs: bool = False
  # A parameter or output bound to an int4/uint4 buffer (one value per byte, in its low nibble):
  # the table declares it s4/u4; here, as to every access pattern, it is s8/u8, the same bytes.
  nibbles: bool = False

  @property
  def table_dtype_shape(self) -> tuple:
    """(dtype, shape) as the tensor table declares them."""
    if self.complex_pairs:
      return DType.C64, tuple(self.shape[:-1])
    if self.nibbles:
      return _NIBBLE_TYPES[self.dtype], tuple(self.shape)
    return self.dtype, tuple(self.shape)


@dataclasses.dataclass
class DebugEntry:
  op: str
  name: str
  location: str
  lowering: str = ""  # "native" | "gpsimd" | "fused" | "empty" | "" (not an op's instructions)
  rule: str = ""      # the lowering rule, "matmul.lower_dot_general" (may be empty)


# The TileAP fields a loop may step (the format's step kind 3, version 7), by their field code.
TILE_FIELDS = ("byte_offset", "partition_start")


@dataclasses.dataclass(frozen=True)
class TileStep:
  """How a tile operand's `field` (TILE_FIELDS) moves per iteration: iteration i adds
  (((phase + i) mod period) − phase)·step to iteration 0's value (period 0: i·step), so buffers
  that rotate every `period` iterations (double buffering) are one stepped tile. `phase` is where
  iteration 0 stands in the rotation (peel-loops advances it)."""
  step: int
  period: int = 0
  phase: int = 0

  def __post_init__(self):
    if self.period < 0 or (self.period and not 0 <= self.phase < self.period) or (
        not self.period and self.phase):
      raise ValueError(f"a tile step's phase {self.phase} lies in its period {self.period}")

  def turns(self, i: int) -> int:
    """How many steps iteration i is away from iteration 0."""
    return ((self.phase + i) % self.period - self.phase) if self.period else i

  def span(self, count: int) -> tuple[int, int]:
    """(least, most) of `turns` over iterations 0..count-1."""
    if not self.period:
      return 0, count - 1
    if self.phase + count - 1 < self.period:
      return 0, count - 1
    return -self.phase, self.period - 1 - self.phase

  def advanced(self) -> "TileStep":
    """The same movement seen from iteration 1 (peel-loops: iteration 1 is the new 0)."""
    return dataclasses.replace(self, phase=(self.phase + 1) % self.period) if self.period else self


def tile_operand_keys(inst: "Instruction") -> list:
  """The names of an instruction's tile operands in their encoding order (a tile endpoint, a
  per-partition scalar tile and a present row-sum tile count; the format's tile operand
  numbering for step kind 3)."""
  return [name for name, kind in OPERAND_LAYOUT[inst.opcode]
          if kind in ("tile", "endpoint", "scalar_operand", "summed_tile")
          and isinstance(inst.operands[name], TileAP)]


def _tile_moved(tile: TileAP, field: str, moved: int) -> TileAP:
  return dataclasses.replace(tile, **{field: getattr(tile, field) + moved})


@dataclasses.dataclass(eq=False)
class Loop:
  """A counted loop (format version 4): the instructions that carry it, consecutive in program
  order within one block, run `count` times in a row. Each stream's share of them is that
  stream's loop body; iteration i's waits and HBM offsets are iteration 0's plus i times their
  steps (`Instruction.wait_steps`, `Instruction.steps`). Loops nest: `parent` is the loop whose
  body holds this one (an instruction's steps for it: `Instruction.outer`)."""
  count: int
  # Set by the back end's peel-loops stage once the body's first iteration precedes the loop.
  peeled: bool = False
  parent: "Loop | None" = None

  def chain(self) -> list:
    """The loops holding this loop's body, outermost first, this one last."""
    chain, loop = [], self
    while loop is not None:
      chain.append(loop)
      loop = loop.parent
    return chain[::-1]


@dataclasses.dataclass
class Instruction:
  opcode: Opcode
  stream: int | None  # None: a DMA whose queue the back end's assign-dma-queues stage chooses
  debug_id: int
  operands: dict  # field name -> value, in OPERAND_LAYOUT order
  waits: list = dataclasses.field(default_factory=list)  # [(stream, count)]: iteration 0's
  loop: Loop | None = None  # the innermost loop holding it
  # In a loop: HBM operand key (hbm_operand_keys) -> elements its offset moves per iteration,
  # or a stepped value's name (stepped_values) -> what it adds per iteration;
  # waited stream -> how much its wait count grows per iteration.
  steps: dict = dataclasses.field(default_factory=dict)
  wait_steps: dict = dataclasses.field(default_factory=dict)
  # The same per iteration of each enclosing loop of `loop`: Loop -> (steps, wait_steps).
  outer: dict = dataclasses.field(default_factory=dict)
  # The physical core it runs on (its stream is one of that core's; a DMA without a queue yet
  # gets one of that core's queues).
  core: int = 0
  # (split, share) for the shares of one op divided between the physical cores
  # (ProgramBuilder.on_core): the HBM writes of different shares of one split are disjoint.
  part: tuple | None = None

  def loops(self) -> list:
    """The loops holding this instruction, outermost first."""
    return self.loop.chain() if self.loop is not None else []

  def steps_of(self, loop: Loop) -> tuple[dict, dict]:
    """(steps, wait_steps) per iteration of `loop`, one of the loops holding this instruction;
    the dicts are this instruction's own (a caller may fill them)."""
    if loop is self.loop:
      return self.steps, self.wait_steps
    return self.outer.setdefault(loop, ({}, {}))

  def moved(self, loop: Loop, i: int) -> "Instruction":
    """This instruction with `loop`'s steps applied `i` times (its other loops' steps kept)."""
    if i == 0:
      return self
    steps, wait_steps = self.steps_of(loop)
    operands = dict(self.operands)
    for key, step in steps.items():
      name, index = key if isinstance(key, tuple) else (key, None)
      if isinstance(step, TileStep):
        operands[name] = _tile_moved(operands[name], index, step.turns(i) * step.step)
      elif name in stepped_values(self):
        operands[name] = operands[name] + step * i
      elif index is None:
        operands[name] = operands[name].moved(step * i)
      else:
        operands[name] = [ap.moved(step * i) if k == index else ap
                          for k, ap in enumerate(operands[name])]
    waits = [(s, c + wait_steps.get(s, 0) * i) for s, c in self.waits]
    return dataclasses.replace(self, operands=operands, waits=waits)

  def advance(self, loop: Loop) -> None:
    """Makes iteration 1 of `loop` this instruction's iteration 0 (peel-loops): its operands
    move one iteration and its rotating tile steps one place in their rotation."""
    self.operands = self.moved(loop, 1).operands
    steps = self.steps_of(loop)[0]
    for key, step in steps.items():
      if isinstance(step, TileStep):
        steps[key] = step.advanced()

  def tile_moves(self, iterations: dict) -> dict:
    """{tile operand: (partitions, bytes)} its tile steps move it at `iterations` ({Loop: i})
    of the loops holding it: what `at_iterations` moves, without building the instruction."""
    moves = {}
    for loop in self.loops():
      i = iterations.get(loop, 0)
      for key, step in self.steps_of(loop)[0].items():
        if isinstance(step, TileStep) and i:
          partitions, bytes_ = moves.get(key[0], (0, 0))
          moved = step.turns(i) * step.step
          moves[key[0]] = ((partitions + moved, bytes_) if key[1] == "partition_start"
                           else (partitions, bytes_ + moved))
    return moves

  def tile_stepped(self) -> bool:
    """Whether a loop moves one of its tiles."""
    return any(isinstance(step, TileStep) for loop in self.loops()
               for step in self.steps_of(loop)[0].values())

  def at_iterations(self, iterations: dict) -> "Instruction":
    """As iterations[L] of each loop L holding it runs it (a loop not given: iteration 0)."""
    inst = self
    for loop in self.loops():
      inst = inst.moved(loop, iterations.get(loop, 0))
    return inst


@dataclasses.dataclass
class Exit:
  """How a block ends: END the program, JUMP to targets[0], BRANCH to targets[0] if the
  one-element `selector` is != 0 else targets[1], SWITCH to targets[selector] (out of range:
  the last target)."""
  op: ControlOp = ControlOp.END
  debug_id: int = 0
  selector: object = None  # HbmAP of one element (branch, switch)
  targets: list = dataclasses.field(default_factory=list)


def stepped_values(inst: Instruction) -> tuple[str, ...]:
  """The plain-number operands a loop may step (the format's step kind 2): the base of an iota
  or an affine_select."""
  return ("base",) if inst.opcode in (Opcode.IOTA, Opcode.AFFINE_SELECT) else ()


def hbm_operand_keys(inst: Instruction) -> list:
  """The keys of an instruction's HBM access patterns in their encoding order: the operand's
  name, or (name, index) inside an HBM list (the format's HBM operand numbering)."""
  keys = []
  for name, kind in OPERAND_LAYOUT[inst.opcode]:
    value = inst.operands[name]
    if kind == "hbm" or (kind == "endpoint" and isinstance(value, HbmAP)):
      keys.append(name)
    elif kind == "hbm_list":
      keys.extend((name, k) for k in range(len(value)))
  return keys


@dataclasses.dataclass
class Block:
  # In program order as the builder emitted them (a program read back: stream by stream, which
  # keeps the order within each stream, the only order a loaded program has).
  instructions: list = dataclasses.field(default_factory=list)
  exit: Exit = dataclasses.field(default_factory=Exit)

  def executed(self, selected=None):
    """Every instruction as the block runs it, in program order: each loop's instructions once
    per iteration (concrete waits and offsets; nested loops too). For checks; O(executed
    instructions). With `selected` (a predicate on the stored instruction), only those: a loop
    none of whose instructions is selected costs nothing."""
    yield from _executed(self.instructions, 0, {}, selected)

  @property
  def streams(self) -> dict:
    """stream id -> its instructions in order."""
    streams: dict = {}
    for inst in self.instructions:
      streams.setdefault(inst.stream, []).append(inst)
    return streams


def _executed(insts: list, depth: int, iterations: dict, selected):
  """`insts` (a block's instructions, or the body of a loop nested `depth` deep) as they run:
  each loop below `depth` once per iteration, at `iterations` of the loops above."""
  k = 0
  while k < len(insts):
    chain = insts[k].loops()
    if len(chain) <= depth:
      if selected is None or selected(insts[k]):
        yield insts[k].at_iterations(iterations)
      k += 1
      continue
    inner = chain[depth]
    end = k
    while end < len(insts) and inner in insts[end].loops()[depth:depth + 1]:
      end += 1
    body = insts[k:end]
    if selected is None or any(selected(inst) for inst in body):
      for i in range(inner.count):
        yield from _executed(body, depth + 1, {**iterations, inner: i}, selected)
    k = end


# Operand kinds: "u8", "u32", "u64", "i64", "f32" plain numbers; "tile" TileAP; "hbm" HbmAP; "hbm_list" a list of
# HbmAPs; "endpoint" HbmAP | TileAP; "scalar" Scalar; "scalar_operand" Scalar | TileAP [P, 1];
# "i64_list" a u32 count then that many i64; "row_sum" a RowSum as a u8; "summed_tile" a TileAP
# when the instruction's row_sum operand is not RowSum.NONE, nothing (None) when it is.
OPERAND_LAYOUT = {
    Opcode.DMA_COPY: (("dst", "endpoint"), ("src", "endpoint")),
    Opcode.MATMUL: (("dst", "tile"), ("stationary", "tile"), ("moving", "tile"), ("flags", "u8")),
    Opcode.TRANSPOSE: (("dst", "tile"), ("src", "tile")),
    Opcode.TENSOR_TENSOR: (("op", "u8"), ("dst", "tile"), ("a", "tile"), ("b", "tile")),
    Opcode.TENSOR_SCALAR: (("op", "u8"), ("reverse", "u8"), ("dst", "tile"), ("src", "tile"),
                           ("scalar", "scalar_operand")),
    Opcode.TENSOR_REDUCE: (("op", "u8"), ("dst", "tile"), ("src", "tile")),
    Opcode.TENSOR_COPY: (("dst", "tile"), ("src", "tile")),
    Opcode.TENSOR_TERNARY: (("op", "u8"), ("dst", "tile"), ("a", "tile"), ("b", "tile"),
                            ("c", "tile")),
    Opcode.TENSOR_UNARY: (("op", "u8"), ("dst", "tile"), ("src", "tile")),
    Opcode.SCALAR_TENSOR_TENSOR: (("op0", "u8"), ("op1", "u8"), ("reverse0", "u8"),
                                  ("reverse1", "u8"), ("dst", "tile"), ("data", "tile"),
                                  ("operand0", "scalar_operand"), ("operand1", "tile")),
    Opcode.BN_STATS: (("dst", "tile"), ("src", "tile")),
    Opcode.BN_AGGR: (("dst", "tile"), ("src", "tile")),
    Opcode.ACTIVATION: (("func", "u8"), ("dst", "tile"), ("src", "tile"), ("scale", "f32"),
                        ("bias", "scalar_operand")),
    # scale per partition or immediate; dst_sum: each row's fp32 sum (sum_of: of dst as written,
    # or of the activated values before their rounding to dst's dtype), None without a sum.
    Opcode.ACTIVATION_REDUCE: (("func", "u8"), ("dst", "tile"), ("src", "tile"),
                               ("scale", "scalar_operand"), ("bias", "scalar_operand"),
                               ("sum_of", "row_sum"), ("dst_sum", "summed_tile")),
    Opcode.GP_ELEMENTWISE: (("op", "u8"), ("dst", "hbm"), ("srcs", "hbm_list")),
    Opcode.GP_COPY: (("dst", "hbm"), ("src", "hbm")),
    Opcode.GP_FILL: (("dst", "hbm"), ("value", "scalar")),
    Opcode.GP_IOTA: (("dst", "hbm"), ("dim", "u8")),
    Opcode.GP_BITCAST: (("dst", "u32"), ("src", "u32")),
    Opcode.GP_REDUCE: (("op", "u8"), ("dst", "hbm"), ("src", "hbm"), ("reduced", "u8"),
                       ("init", "scalar")),
    Opcode.GP_BATCH_MATMUL: (("dst", "hbm"), ("lhs", "hbm"), ("rhs", "hbm")),
    Opcode.GP_GATHER: (("dst", "hbm"), ("src", "hbm"), ("indices", "hbm")),
    Opcode.GP_SCATTER: (("op", "u8"), ("bounds", "u8"), ("dst", "hbm"), ("updates", "hbm"),
                        ("indices", "hbm")),
    Opcode.GP_ARG_REDUCE: (("op", "u8"), ("body", "u8"), ("dst_value", "hbm"), ("dst_index", "hbm"),
                                ("src_value", "hbm"), ("src_index", "hbm"), ("reduced", "u8"),
                                ("init_value", "scalar"), ("init_index", "scalar")),
    Opcode.GP_SORT: (("num_keys", "u8"), ("descending", "u8"), ("float_order", "u8"),
                     ("dsts", "hbm_list"), ("srcs", "hbm_list")),
    # window: six i64 per dim (size, stride, base_dilation, window_dilation, pad_low, pad_high).
    Opcode.GP_REDUCE_WINDOW: (("op", "u8"), ("dst", "hbm"), ("src", "hbm"), ("init", "scalar"),
                              ("window", "i64_list")),
    Opcode.GP_SELECT_AND_SCATTER: (("select_op", "u8"), ("op", "u8"), ("dst", "hbm"),
                                   ("operand", "hbm"), ("source", "hbm"), ("init", "scalar"),
                                   ("window", "i64_list")),
    # region: a region program (docs/program-format.md), inits broadcast to the dsts' dims.
    Opcode.GP_REGION_REDUCE: (("reduced", "u8"), ("dsts", "hbm_list"), ("srcs", "hbm_list"),
                              ("inits", "hbm_list"), ("region", "i64_list")),
    Opcode.GP_REGION_REDUCE_WINDOW: (("dsts", "hbm_list"), ("srcs", "hbm_list"),
                                     ("inits", "hbm_list"), ("window", "i64_list"),
                                     ("region", "i64_list")),
    Opcode.GP_REGION_SCATTER: (("dsts", "hbm_list"), ("updates", "hbm_list"),
                               ("indices", "hbm"), ("region", "i64_list")),
    Opcode.GP_REGION_SORT: (("dsts", "hbm_list"), ("srcs", "hbm_list"), ("region", "i64_list")),
    Opcode.GP_CONVOLUTION: (("feature_groups", "u32"), ("batch_groups", "u32"),
                            ("window", "i64_list"), ("dst", "hbm"), ("lhs", "hbm"),
                            ("rhs", "hbm")),
    # groups: the group size, then every group's ranks; pairs: (source, target) ranks.
    Opcode.COLLECTIVE: (("kind", "u8"), ("op", "u8"), ("dim", "u8"), ("concat_dim", "u8"),
                        ("algorithm", "u8"), ("channel", "u32"), ("groups", "i64_list"),
                        ("pairs", "i64_list"), ("dst", "hbm"), ("src", "hbm")),
    Opcode.PARTITION_ID: (("dst", "hbm"),),
    # callback: the key the host's registry knows the callable by (docs/host-callbacks.md).
    Opcode.HOST_CALLBACK: (("callback", "u64"), ("dsts", "hbm_list"), ("srcs", "hbm_list")),
    # dst[p, i...] = base + p·partition_step + Σ i_d·free_steps[d]; free_steps: one per free dim.
    Opcode.IOTA: (("dst", "tile"), ("base", "i64"), ("partition_step", "i64"),
                  ("free_steps", "i64_list")),
    # dst = (that affine value) op 0 ? src : fill; op: a compare.
    Opcode.AFFINE_SELECT: (("op", "u8"), ("dst", "tile"), ("src", "tile"), ("base", "i64"),
                           ("partition_step", "i64"), ("free_steps", "i64_list"),
                           ("fill", "scalar")),
}

# Fields a later program format version added: (opcode, field) -> (the version, the value an
# older program's instruction has).
FIELD_SINCE = {(Opcode.COLLECTIVE, "algorithm"): (5, 0)}


def operand_layout(opcode: Opcode, version: int) -> tuple:
  """The (name, kind) fields a program of format `version` stores for `opcode`."""
  return tuple((name, kind) for name, kind in OPERAND_LAYOUT[opcode]
               if FIELD_SINCE.get((opcode, name), (0, None))[0] <= version)


# gp_scatter and gp_region_scatter combine into what their destinations hold.
_READS_DST = frozenset({Opcode.GP_SCATTER, Opcode.GP_REGION_SCATTER})



# Tile regions of core c carry memory + c * _CORE_MEMORY_KEY: each core has its own SBUF and PSUM.
_CORE_MEMORY_KEY = 16


def region(operand, core: int = 0, part=None):
  """The memory region an operand touches: ("hbm", tensor, part) (part: the instruction's
  `part`) or ("tile", memory key, first_partition, end_partition, first_byte, end_byte), the
  memory key telling the cores' SBUF and PSUM apart; None for immediates."""
  if isinstance(operand, HbmAP):
    return ("hbm", operand.tensor, part)
  if isinstance(operand, TileAP):
    low, high = operand.byte_range()
    return ("tile", int(operand.memory) + _CORE_MEMORY_KEY * core, operand.partition_start,
            operand.partition_start + operand.partition_count, low, high)
  return None


def disjoint_parts(a, b) -> bool:
  """Whether HBM accesses of parts a and b are disjoint: different shares of one split."""
  return a is not None and b is not None and a[0] == b[0] and a[1] != b[1]


def regions_overlap(a, b) -> bool:
  """Whether two regions (`region`) may touch the same bytes (HBM: the same tensor, unless the
  accesses are of different shares of a split)."""
  if a[0] != b[0]:
    return False
  if a[0] == "hbm":
    return a[1] == b[1] and not disjoint_parts(a[2], b[2])
  return a[1] == b[1] and a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]


def hbm_accesses(inst: Instruction):
  """(reads, writes) of HBM: lists of (tensor, the HbmAP, or None for the whole tensor)."""
  ops = inst.operands
  if inst.opcode == Opcode.GP_BITCAST:
    return [(ops["src"], None)], [(ops["dst"], None)]
  reads, writes = [], []
  for name, kind in OPERAND_LAYOUT[inst.opcode]:
    if kind not in ("hbm", "hbm_list", "endpoint"):
      continue
    values = ops[name] if kind == "hbm_list" else [ops[name]]
    target = writes if name.startswith("dst") else reads
    target.extend((ap.tensor, ap) for ap in values if isinstance(ap, HbmAP))
  if inst.opcode in _READS_DST:
    reads.extend(writes)
  return reads, writes


def accesses(inst: Instruction, moves: dict | None = None):
  """(reads, writes): lists of regions. `moves`: {tile operand: (partitions, bytes)} it is
  moved by (a loop iteration's tile steps; HBM regions are whole tensors, which no offset
  moves)."""
  ops = inst.operands
  if inst.opcode == Opcode.GP_BITCAST:
    return [("hbm", ops["src"], inst.part)], [("hbm", ops["dst"], inst.part)]
  reads, writes = [], []
  for name, kind in OPERAND_LAYOUT[inst.opcode]:
    if kind in ("u8", "u32", "u64", "f32", "scalar", "i64_list"):
      continue
    values = ops[name] if kind == "hbm_list" else [ops[name]]
    # Destination fields are named dst, dst_* or dsts.
    target = writes if name.startswith("dst") else reads
    found = [r for r in (region(v, inst.core, inst.part) for v in values) if r is not None]
    if moves and name in moves:
      (partitions, bytes_), (kind_, memory, p0, p1, b0, b1) = moves[name], found[0]
      found = [(kind_, memory, p0 + partitions, p1 + partitions, b0 + bytes_, b1 + bytes_)]
    target.extend(found)
  if inst.opcode in _READS_DST or (inst.opcode == Opcode.MATMUL and
                                   not ops["flags"] & MATMUL_START):
    # combines into / accumulates into what is there
    reads.extend(writes if inst.opcode == Opcode.GP_REGION_SCATTER else writes[:1])
  return reads, writes

