"""ProgramBuilder: the compiler's way to write a NeuronCore program. One method per instruction.
It checks only what it needs to construct and serialize operands (their Python types); every
validity rule of the format (partition rules, element counts, engine constraints, op/dtype
agreement, writable destinations) is the C++ loader's (pjrt_plugin/sim/program_loader.cc,
instruction_rules.cc), which the compile path runs on every program it returns, naming the
instruction and its StableHLO op and source line.

Instructions are appended in program order; the back end (hlo_lowering.backend) then places the
symbolic SBUF/PSUM buffers (`new_buffer`), gives every DMA without a queue its queue and derives
every semaphore wait, before `serialize`."""

import contextlib

import numpy as np

from .buffers import Buffer
from .enums import (ARG_REDUCE_COMPARATOR, COLLECTIVE_RING, MATMUL_START, MATMUL_STOP, NUM_STREAMS,
                    SORT_FLOAT_CANONICAL, Alu, ControlOp, DType, Memory, Opcode, RowSum, Stream,
                    TensorKind, on_core)
from .instructions import (TILE_FIELDS, Block, DebugEntry, Exit, Instruction, Loop, Tensor,
                           TileStep, stepped_values, tile_operand_keys)
from .operands import HbmAP, Scalar, TileAP
from .writer import serialize

# The loader's limit (pjrt_plugin/sim/program.h kMaxLoopDepth).
MAX_LOOP_DEPTH = 8


def _expect(value, kinds, where: str, what: str):
  if not isinstance(value, kinds):
    raise ValueError(f"{where}: expected {what}, got {type(value).__name__}")
  return value


def _tile(ap, where: str) -> TileAP:
  return _expect(ap, TileAP, where, "a TileAP")


def _hbm(ap, where: str) -> HbmAP:
  return _expect(ap, HbmAP, where, "an HbmAP")


def _hbms(aps, where: str) -> list[HbmAP]:
  return [_hbm(ap, where) for ap in aps]


def _endpoint(ap, where: str):
  return _expect(ap, (HbmAP, TileAP), where, "an HbmAP or TileAP")


def _scalar(value, where: str) -> Scalar:
  return _expect(value, Scalar, where, "a Scalar")


def _scalar_operand(value, where: str):
  """An immediate Scalar or a per-partition [P, 1] TileAP."""
  return value if isinstance(value, Scalar) else _tile(value, where)


def _step_value(inst, key, value):
  """A step as stored: a TileStep for a (tile operand, field) key, else an int."""
  if isinstance(key, tuple) and len(key) == 2 and key[1] in TILE_FIELDS:
    return value if isinstance(value, TileStep) else TileStep(int(value))
  return int(value)


def _check_tile_step(inst, key, step: TileStep, count: int) -> None:
  """A tile step names a tile operand, and every iteration's tile stays in its buffer (what
  only the builder knows: the loader sees placed tiles)."""
  name, field = key
  where = f"{inst.opcode.name.lower()}: a tile step for {key!r}"
  if name not in tile_operand_keys(inst):
    raise ValueError(f"{where}, not a tile operand {tile_operand_keys(inst)}")
  tile = inst.operands[name]
  if field != "byte_offset" or tile.buffer is None:
    return  # partitions and absolute offsets: the loader checks every iteration's
  for turns in step.span(count):
    low, high = tile.byte_range()
    if not (0 <= low + turns * step.step and high + turns * step.step <= tile.buffer.size):
      raise ValueError(f"{where} leaves its buffer {tile.buffer} ({tile.buffer.size} bytes) "
                       f"{turns} steps from iteration 0: {tile}")


def _flat(window) -> list[int]:
  """A window (one tuple of values per dim) as the format's flat i64 list."""
  return [int(v) for w in window for v in w]


class ProgramBuilder:
  def __init__(self, target: str | dict = "trn2", source: str = ""):
    """`target`: the target's name or its description (jax_trn._native.target_spec); the loader
    rejects a name it does not know."""
    self.target = target["name"] if isinstance(target, dict) else str(target)
    self.source = source
    self.tensors = []
    self.debug_entries = []
    self.instructions = []  # program order, every block
    # Execution starts at blocks[0]; instructions go to blocks[self.block].
    self.blocks = [Block()]
    self.block = 0
    self.buffers = []  # [Buffer], in the order they were asked for
    # Buffer -> (address, first, last instruction index using it): filled by the back end's
    # plan-memory stage, read by its verifier.
    self.memory_plan = {}
    # Donated parameters: parameter number -> the output that may reuse its buffer (read by the
    # back end's alias-donations stage).
    self.output_aliases: dict[int, int] = {}
    self._default_debug = None
    self._loop = None  # the Loop being emitted, if any
    self._core = 0  # the physical core instructions go to (`on_core`)
    self._part = None  # their share of a split (`on_core`)
    self._splits = 0
    self.cores = 1  # physical cores used so far (an LNC=2 device's program may use 2)

  @property
  def streams(self) -> dict:
    """The current block's streams: stream id -> [Instruction]."""
    return self.blocks[self.block].streams

  # --- blocks and control flow --------------------------------------------------------------

  def new_block(self) -> int:
    """A new empty block (ending the program until given an exit); returns its index."""
    self.blocks.append(Block())
    return len(self.blocks) - 1

  @contextlib.contextmanager
  def loop(self, count: int):
    """Instructions emitted inside the `with` form one iteration of a counted loop run `count`
    times (format version 4); give each HBM operand that moves per iteration its step
    (`steps=` of the instruction methods). A loop inside another's `with` is nested in it. The
    back end derives per-iteration waits."""
    if int(count) < 1:
      raise ValueError(f"a loop runs at least once, not {count} times")
    if self._loop is not None and len(self._loop.chain()) >= MAX_LOOP_DEPTH:
      raise ValueError(f"loops nest at most {MAX_LOOP_DEPTH} deep")
    outer = self._loop
    self._loop = Loop(int(count), parent=outer)
    try:
      yield self._loop
    finally:
      self._loop = outer

  # --- the physical cores of an LNC=2 device (format version 6) --------------------------------

  def new_split(self) -> int:
    """A fresh id for one op's work divided between the physical cores (`on_core`)."""
    self._splits += 1
    return self._splits

  @contextlib.contextmanager
  def on_core(self, core: int, split: int | None = None):
    """Instructions emitted inside run on physical core `core` (its engines, its SBUF and PSUM;
    HBM is shared). `split` (`new_split`): the instructions are core `core`'s share of one op
    divided between the cores, whose HBM writes are disjoint from every other share's: the back
    end orders the shares only where another op reads or writes what a share wrote."""
    if self._loop is not None:
      raise ValueError("a loop stays on one core")
    saved = self._core, self._part
    self._core, self._part = int(core), None if split is None else (int(split), int(core))
    self.cores = max(self.cores, self._core + 1)
    try:
      yield
    finally:
      self._core, self._part = saved

  def num_streams(self) -> int:
    """Stream ids the program uses: 21 per physical core."""
    return self.cores * NUM_STREAMS

  def set_block(self, index: int) -> None:
    """Instructions emitted from now on go to block `index`."""
    if self._loop is not None:
      raise ValueError("a loop stays inside one block")
    if not 0 <= index < len(self.blocks):
      raise ValueError(f"block {index} does not exist ({len(self.blocks)} blocks)")
    self.block = index

  def jump(self, target: int, debug=None) -> None:
    """The current block continues with block `target`."""
    self._set_exit(Exit(ControlOp.JUMP, self._debug_id(debug), None, [target]))

  def branch(self, predicate, if_true: int, if_false: int, debug=None) -> None:
    """The current block continues with `if_true` when the one-element `predicate` (pred or an
    integer in HBM) is nonzero, with `if_false` otherwise."""
    self._set_exit(Exit(ControlOp.BRANCH, self._debug_id(debug), _hbm(predicate, "branch"),
                        [if_true, if_false]))

  def switch(self, index, targets, debug=None) -> None:
    """The current block continues with targets[index] (an integer in HBM); an index outside
    [0, len(targets)) takes the last target, as XLA's case does."""
    targets = [int(t) for t in targets]
    self._set_exit(Exit(ControlOp.SWITCH, self._debug_id(debug), _hbm(index, "switch"), targets))

  def _set_exit(self, exit_: Exit) -> None:
    block = self.blocks[self.block]
    if block.exit.op != ControlOp.END:
      raise ValueError(f"block {self.block} already ends in {block.exit.op.name.lower()}")
    block.exit = exit_

  # --- tables -------------------------------------------------------------------------------

  def tensor(self, kind, dtype, shape, index=0, name="", complex_pairs=False,
             nibbles=False) -> int:
    """`complex_pairs`: a parameter or output bound to a c64 [d...] buffer, given as the f32
    [d..., 2] its access patterns read; `nibbles`: one bound to an s4/u4 buffer, given as the
    s8/u8 its access patterns read."""
    kind = TensorKind[kind.upper()] if isinstance(kind, str) else TensorKind(kind)
    if kind == TensorKind.CONSTANT:
      raise ValueError("constants carry data: use ProgramBuilder.constant")
    shape = tuple(int(d) for d in shape)
    if kind not in (TensorKind.PARAMETER, TensorKind.OUTPUT):
      index = 0
    if complex_pairs and (kind not in (TensorKind.PARAMETER, TensorKind.OUTPUT)
                          or DType(dtype) != DType.F32 or shape[-1:] != (2,)):
      raise ValueError(f"complex pairs are an f32 [..., 2] parameter or output, not {shape}")
    if nibbles and (kind not in (TensorKind.PARAMETER, TensorKind.OUTPUT)
                    or DType(dtype) not in (DType.S8, DType.U8)):
      raise ValueError(f"nibbles are an s8/u8 parameter or output, not {DType(dtype).name}")
    self.tensors.append(Tensor(name, kind, index, DType(dtype), shape, complex_pairs=complex_pairs,
                               nibbles=nibbles))
    return len(self.tensors) - 1

  def constant(self, dtype, shape, data: bytes, name="") -> int:
    dtype = DType(dtype)
    shape = tuple(int(d) for d in shape)
    self.tensors.append(Tensor(name, TensorKind.CONSTANT, 0, dtype, shape, bytes(data)))
    return len(self.tensors) - 1

  def new_buffer(self, memory, size: int, placement: str) -> Buffer:
    """A symbolic SBUF/PSUM buffer of `size` bytes per partition, placed by plan-memory."""
    buffer = Buffer(len(self.buffers), Memory(memory), int(size), placement)
    self.buffers.append(buffer)
    return buffer

  def debug(self, op="", name="", location="", lowering="", rule="") -> int:
    self.debug_entries.append(DebugEntry(op, name, location, lowering, rule))
    return len(self.debug_entries) - 1

  # --- DMA and TensorE ----------------------------------------------------------------------

  def dma_copy(self, queue, dst, src, debug=None, steps=None):
    """queue None: the back end's assign-dma-queues stage chooses it. steps: in a loop,
    {"dst" or "src": elements its HBM offset moves per iteration}."""
    dst, src = _endpoint(dst, "dma_copy"), _endpoint(src, "dma_copy")
    stream = None if queue is None else Stream.dma(queue)
    inst = self._emit(Opcode.DMA_COPY, stream, debug, dst=dst, src=src)
    self._set_steps(inst, steps)

  def matmul(self, dst, stationary, moving, start=True, stop=True, debug=None, steps=None):
    """steps: in a loop, {(tile operand, TILE_FIELDS field): a TileStep or bytes / partitions
    per iteration}, as every tile instruction's `steps=`."""
    dst, stationary, moving = (_tile(a, "matmul") for a in (dst, stationary, moving))
    flags = (MATMUL_START if start else 0) | (MATMUL_STOP if stop else 0)
    inst = self._emit(Opcode.MATMUL, Stream.PE, debug, dst=dst, stationary=stationary,
                      moving=moving, flags=flags)
    self._set_steps(inst, steps)

  def transpose(self, dst, src, debug=None, steps=None):
    dst, src = _tile(dst, "transpose"), _tile(src, "transpose")
    self._set_steps(self._emit(Opcode.TRANSPOSE, Stream.PE, debug, dst=dst, src=src), steps)

  # --- VectorE and ScalarE ------------------------------------------------------------------

  def tensor_tensor(self, op, dst, a, b_, debug=None, steps=None):
    dst, a, b_ = (_tile(x, "tensor_tensor") for x in (dst, a, b_))
    self._set_steps(self._emit(Opcode.TENSOR_TENSOR, Stream.DVE, debug, op=Alu(op), dst=dst,
                               a=a, b=b_), steps)

  def tensor_scalar(self, op, dst, src, scalar, reverse=False, debug=None, steps=None):
    dst, src = _tile(dst, "tensor_scalar"), _tile(src, "tensor_scalar")
    inst = self._emit(Opcode.TENSOR_SCALAR, Stream.DVE, debug, op=Alu(op),
                      reverse=int(bool(reverse)), dst=dst, src=src,
                      scalar=_scalar_operand(scalar, "tensor_scalar"))
    self._set_steps(inst, steps)

  def tensor_reduce(self, op, dst, src, debug=None):
    dst, src = _tile(dst, "tensor_reduce"), _tile(src, "tensor_reduce")
    self._emit(Opcode.TENSOR_REDUCE, Stream.DVE, debug, op=Alu(op), dst=dst, src=src)

  def tensor_copy(self, dst, src, debug=None, steps=None):
    dst, src = _tile(dst, "tensor_copy"), _tile(src, "tensor_copy")
    self._set_steps(self._emit(Opcode.TENSOR_COPY, Stream.DVE, debug, dst=dst, src=src), steps)

  def tensor_ternary(self, op, dst, a, b_, c, debug=None):
    dst, a, b_, c = (_tile(x, "tensor_ternary") for x in (dst, a, b_, c))
    self._emit(Opcode.TENSOR_TERNARY, Stream.DVE, debug, op=Alu(op), dst=dst, a=a, b=b_, c=c)

  def scalar_tensor_tensor(self, op0, op1, dst, data, operand0, operand1, reverse0=False,
                           reverse1=False, debug=None):
    """VectorE's (data op0 operand0) op1 operand1 (NKI's scalar_tensor_tensor): operand0 an
    immediate or a [P, 1] tile, the intermediate kept in fp32; reverse0 / reverse1 swap each
    op's operands. A tensor_tensor's cost."""
    dst, data = _tile(dst, "scalar_tensor_tensor"), _tile(data, "scalar_tensor_tensor")
    self._emit(Opcode.SCALAR_TENSOR_TENSOR, Stream.DVE, debug, op0=Alu(op0), op1=Alu(op1),
               reverse0=int(bool(reverse0)), reverse1=int(bool(reverse1)), dst=dst, data=data,
               operand0=_scalar_operand(operand0, "scalar_tensor_tensor"),
               operand1=_tile(operand1, "scalar_tensor_tensor"))

  def bn_stats(self, dst, src, debug=None):
    """VectorE's per-partition statistics of src (NKI's bn_stats, up to 512 elements): dst
    [P, 6] = count, mean and count · variance of the even elements, then of the odd ones."""
    dst, src = _tile(dst, "bn_stats"), _tile(src, "bn_stats")
    self._emit(Opcode.BN_STATS, Stream.DVE, debug, dst=dst, src=src)

  def bn_aggr(self, dst, src, debug=None):
    """VectorE's combination of bn_stats tuples (NKI's bn_aggr): dst [P, 2] = the mean and
    variance of everything the tuples along src describe."""
    dst, src = _tile(dst, "bn_aggr"), _tile(src, "bn_aggr")
    self._emit(Opcode.BN_AGGR, Stream.DVE, debug, dst=dst, src=src)

  def tensor_unary(self, op, dst, src, debug=None):
    dst, src = _tile(dst, "tensor_unary"), _tile(src, "tensor_unary")
    self._emit(Opcode.TENSOR_UNARY, Stream.DVE, debug, op=Alu(op), dst=dst, src=src)

  def activation(self, func, dst, src, scale=1.0, bias=Scalar(DType.F32, 0.0), debug=None,
                 steps=None):
    dst, src = _tile(dst, "activation"), _tile(src, "activation")
    inst = self._emit(Opcode.ACTIVATION, Stream.ACT, debug, func=Alu(func), dst=dst, src=src,
                      scale=float(np.float32(scale)), bias=_scalar_operand(bias, "activation"))
    self._set_steps(inst, steps)

  def activation_reduce(self, func, dst, src, scale=Scalar(DType.F32, 1.0),
                        bias=Scalar(DType.F32, 0.0), dst_sum=None, sum_before_rounding=False,
                        debug=None):
    """activation with a per-partition (or immediate) scale; with dst_sum, also each row's fp32
    sum in tensor_reduce's order: of dst as written, or with sum_before_rounding of the
    activated fp32 values (what ScalarE's reduce registers sum on the chip)."""
    dst, src = _tile(dst, "activation_reduce"), _tile(src, "activation_reduce")
    sum_of = (RowSum.NONE if dst_sum is None
              else RowSum.ACTIVATED if sum_before_rounding else RowSum.WRITTEN)
    self._emit(Opcode.ACTIVATION_REDUCE, Stream.ACT, debug, func=Alu(func), dst=dst, src=src,
               scale=_scalar_operand(scale, "activation_reduce"),
               bias=_scalar_operand(bias, "activation_reduce"), sum_of=sum_of,
               dst_sum=None if dst_sum is None else _tile(dst_sum, "activation_reduce"))

  # --- GpSimd general-purpose ops over HBM --------------------------------------------------

  def gp_elementwise(self, op, dst, srcs, debug=None):
    srcs = [_hbm(ap, "gp_elementwise") for ap in srcs]
    self._emit(Opcode.GP_ELEMENTWISE, Stream.POOL, debug, op=Alu(op),
               dst=_hbm(dst, "gp_elementwise"), srcs=srcs)

  def gp_copy(self, dst, src, debug=None):
    self._emit(Opcode.GP_COPY, Stream.POOL, debug, dst=_hbm(dst, "gp_copy"),
               src=_hbm(src, "gp_copy"))

  def gp_fill(self, dst, value, debug=None):
    self._emit(Opcode.GP_FILL, Stream.POOL, debug, dst=_hbm(dst, "gp_fill"),
               value=_scalar(value, "gp_fill"))

  def gp_iota(self, dst, dim, debug=None):
    self._emit(Opcode.GP_IOTA, Stream.POOL, debug, dst=_hbm(dst, "gp_iota"), dim=dim)

  def iota(self, dst, base, partition_step, free_steps, debug=None, steps=None):
    """GpSimd fills the SBUF tile `dst` with base + p·partition_step + Σ i_d·free_steps[d].
    steps: in a loop, {"base": what the base adds per iteration}."""
    dst = _tile(dst, "iota")
    if len(free_steps) != len(dst.free):
      raise ValueError(f"iota: {len(free_steps)} free steps for {len(dst.free)} free dims")
    inst = self._emit(Opcode.IOTA, Stream.POOL, debug, dst=dst, base=int(base),
                      partition_step=int(partition_step), free_steps=[int(s) for s in free_steps])
    self._set_steps(inst, steps)

  def affine_select(self, op, dst, src, base, partition_step, free_steps, fill, debug=None,
                    steps=None):
    """GpSimd: dst = src where (base + p·partition_step + Σ i_d·free_steps[d]) `op` 0 (a
    compare), else the immediate `fill`. steps: as `iota`'s."""
    dst, src = _tile(dst, "affine_select"), _tile(src, "affine_select")
    if len(free_steps) != len(dst.free):
      raise ValueError(f"affine_select: {len(free_steps)} free steps for {len(dst.free)} free dims")
    inst = self._emit(Opcode.AFFINE_SELECT, Stream.POOL, debug, op=Alu(op), dst=dst, src=src,
                      base=int(base), partition_step=int(partition_step),
                      free_steps=[int(s) for s in free_steps],
                      fill=_scalar(fill, "affine_select"))
    self._set_steps(inst, steps)

  def gp_bitcast(self, dst_tensor, src_tensor, debug=None):
    self._emit(Opcode.GP_BITCAST, Stream.POOL, debug, dst=dst_tensor, src=src_tensor)

  def gp_reduce(self, op, dst, src, reduced, init, debug=None):
    self._emit(Opcode.GP_REDUCE, Stream.POOL, debug, op=Alu(op), dst=_hbm(dst, "gp_reduce"),
               src=_hbm(src, "gp_reduce"), reduced=reduced, init=_scalar(init, "gp_reduce"))

  def gp_batch_matmul(self, dst, lhs, rhs, debug=None):
    dst, lhs, rhs = (_hbm(ap, "gp_batch_matmul") for ap in (dst, lhs, rhs))
    self._emit(Opcode.GP_BATCH_MATMUL, Stream.POOL, debug, dst=dst, lhs=lhs, rhs=rhs)

  def gp_convolution(self, dst, lhs, rhs, window, feature_groups=1, batch_groups=1,
                     debug=None):
    """dst [N / batch_groups, O, Y...] = lhs [N, C, X...] (*) rhs [O, C / feature_groups, K...];
    window: one (stride, pad_low, lhs_dilation, rhs_dilation) per spatial dim."""
    dst, lhs, rhs = (_hbm(ap, "gp_convolution") for ap in (dst, lhs, rhs))
    self._emit(Opcode.GP_CONVOLUTION, Stream.POOL, debug, feature_groups=feature_groups,
               batch_groups=batch_groups, window=_flat(window), dst=dst, lhs=lhs, rhs=rhs)

  # --- GpSimd data-dependent ops (indices, arg-reductions, sorting) ---------------------------

  def gp_gather(self, dst, src, indices, debug=None):
    """dst [N, S0..Sr-1] = the window of src [D0..Dr-1] starting at indices[n, :] (clamped)."""
    dst, src, indices = (_hbm(ap, "gp_gather") for ap in (dst, src, indices))
    self._emit(Opcode.GP_GATHER, Stream.POOL, debug, dst=dst, src=src, indices=indices)

  def gp_scatter(self, op, dst, updates, indices, bounds, debug=None):
    """Combines updates[n, S...] into the window of dst at indices[n, :], n in order."""
    dst, updates, indices = (_hbm(ap, "gp_scatter") for ap in (dst, updates, indices))
    self._emit(Opcode.GP_SCATTER, Stream.POOL, debug, op=Alu(op), bounds=bounds, dst=dst,
               updates=updates, indices=indices)

  def gp_arg_reduce(self, op, dst_value, dst_index, src_value, src_index, reduced, init_value,
                    init_index, body=ARG_REDUCE_COMPARATOR, debug=None):
    aps = (_hbm(ap, "gp_arg_reduce") for ap in (dst_value, dst_index, src_value, src_index))
    dst_value, dst_index, src_value, src_index = aps
    self._emit(Opcode.GP_ARG_REDUCE, Stream.POOL, debug, op=Alu(op), body=body,
               dst_value=dst_value, dst_index=dst_index, src_value=src_value,
               src_index=src_index, reduced=reduced,
               init_value=_scalar(init_value, "gp_arg_reduce"),
               init_index=_scalar(init_index, "gp_arg_reduce"))

  def gp_sort(self, dsts, srcs, num_keys=1, descending=False, float_order=SORT_FLOAT_CANONICAL,
              debug=None):
    """Stable sort of every operand along the last access-pattern dim by the first num_keys."""
    dsts, srcs = [_hbm(ap, "gp_sort") for ap in dsts], [_hbm(ap, "gp_sort") for ap in srcs]
    self._emit(Opcode.GP_SORT, Stream.POOL, debug, num_keys=num_keys,
               descending=int(bool(descending)), float_order=float_order, dsts=dsts, srcs=srcs)

  def gp_reduce_window(self, op, dst, src, init, window, debug=None):
    """dst[o] = init folded with op over o's window of src; window: one (size, stride,
    base_dilation, window_dilation, pad_low, pad_high) per dim (docs/program-format.md)."""
    self._emit(Opcode.GP_REDUCE_WINDOW, Stream.POOL, debug, op=Alu(op),
               dst=_hbm(dst, "gp_reduce_window"), src=_hbm(src, "gp_reduce_window"),
               init=_scalar(init, "gp_reduce_window"), window=_flat(window))

  def gp_select_and_scatter(self, select_op, op, dst, operand, source, init, window, debug=None):
    """dst = init, then each source element combined (op) onto the operand position its window
    selects (select_op: keep the current pick while select_op(current, candidate))."""
    dst, operand, source = (_hbm(ap, "gp_select_and_scatter") for ap in (dst, operand, source))
    self._emit(Opcode.GP_SELECT_AND_SCATTER, Stream.POOL, debug, select_op=Alu(select_op),
               op=Alu(op), dst=dst, operand=operand, source=source,
               init=_scalar(init, "gp_select_and_scatter"), window=_flat(window))

  # --- GpSimd ops with a region program body (docs/program-format.md, "Region programs") -----

  def gp_region_reduce(self, dsts, srcs, inits, reduced, region, debug=None):
    """dsts[i] = inits[i] folded with `region` (its words) over the last `reduced` dims of
    srcs[i], in row-major order."""
    self._emit(Opcode.GP_REGION_REDUCE, Stream.POOL, debug, reduced=reduced,
               dsts=_hbms(dsts, "gp_region_reduce"), srcs=_hbms(srcs, "gp_region_reduce"),
               inits=_hbms(inits, "gp_region_reduce"), region=list(region))

  def gp_region_reduce_window(self, dsts, srcs, inits, window, region, debug=None):
    """gp_reduce_window over several operands, folded by `region` from inits."""
    name = "gp_region_reduce_window"
    self._emit(Opcode.GP_REGION_REDUCE_WINDOW, Stream.POOL, debug, dsts=_hbms(dsts, name),
               srcs=_hbms(srcs, name), inits=_hbms(inits, name), window=_flat(window),
               region=list(region))

  def gp_region_scatter(self, dsts, updates, indices, region, debug=None):
    """Each row n of updates[i] combined by `region` into the window of dsts[i] at
    indices[n, :], n in order; a window not wholly inside is skipped."""
    name = "gp_region_scatter"
    self._emit(Opcode.GP_REGION_SCATTER, Stream.POOL, debug, dsts=_hbms(dsts, name),
               updates=_hbms(updates, name), indices=_hbm(indices, name), region=list(region))

  def gp_region_sort(self, dsts, srcs, region, debug=None):
    """Stable sort of every operand along the last dim by the comparator `region`."""
    self._emit(Opcode.GP_REGION_SORT, Stream.POOL, debug, dsts=_hbms(dsts, "gp_region_sort"),
               srcs=_hbms(srcs, "gp_region_sort"), region=list(region))

  # --- between cores (docs/multi-device.md) ----------------------------------------------------

  def collective(self, kind, dst, src, groups=(), pairs=(), op=Alu.COPY, dim=0, concat_dim=0,
                 channel=0, algorithm=COLLECTIVE_RING, debug=None):
    """One collective of `kind` (COLLECTIVE_*) over replica `groups` (equal-size lists of
    ranks; the fold order) or, for collective_permute, (source, target) `pairs`, moved by
    `algorithm` (COLLECTIVE_RING, _HALVING_DOUBLING, _HIERARCHICAL)."""
    groups = [list(map(int, g)) for g in groups]
    flat_groups = [len(groups[0])] + [r for g in groups for r in g] if groups else []
    self._emit(Opcode.COLLECTIVE, Stream.POOL, debug, kind=int(kind), op=Alu(op), dim=int(dim),
               concat_dim=int(concat_dim), algorithm=int(algorithm), channel=int(channel),
               groups=flat_groups,
               pairs=[int(r) for pair in pairs for r in pair], dst=_hbm(dst, "collective"),
               src=_hbm(src, "collective"))

  def partition_id(self, dst, debug=None):
    """dst (one u32) = the executing core's rank in its execution."""
    self._emit(Opcode.PARTITION_ID, Stream.POOL, debug, dst=_hbm(dst, "partition_id"))

  # --- the host (docs/host-callbacks.md) ------------------------------------------------------

  def host_callback(self, callback: int, dsts, srcs, debug=None):
    """The host runs the callable registered under key `callback` on the bytes of `srcs` and
    writes its results into `dsts` (each list dense, in the callable's order)."""
    self._emit(Opcode.HOST_CALLBACK, Stream.POOL, debug, callback=int(callback),
               dsts=[_hbm(d, "host_callback") for d in dsts],
               srcs=[_hbm(s, "host_callback") for s in srcs])

  # --- output -------------------------------------------------------------------------------

  def serialize(self) -> bytes:
    """The program bytes; the back end's stages must have run (hlo_lowering.backend)."""
    for inst in self.instructions:
      if inst.stream is None:
        raise ValueError("serialize: a DMA has no queue (run hlo_lowering.backend's stages)")
    return serialize(self.target, self.tensors, self.blocks, self.debug_entries, self.source)

  # --- helpers ------------------------------------------------------------------------------

  def _debug_id(self, debug) -> int:
    if debug is None:
      if self._default_debug is None:
        self._default_debug = self.debug()
      debug = self._default_debug
    return debug

  def _set_steps(self, inst, steps) -> None:
    """steps: {key: per iteration} of the innermost loop, or one such dict per loop holding the
    instruction, outermost first."""
    chain = inst.loops()
    per_loop = [{k: _step_value(inst, k, v) for k, v in (given or {}).items() if v}
                for given in (steps if isinstance(steps, (list, tuple)) else [steps])]
    if not any(per_loop):
      return
    if not chain:
      raise ValueError(f"{inst.opcode.name.lower()}: offset steps outside a loop")
    if not isinstance(steps, (list, tuple)):
      per_loop = [{}] * (len(chain) - 1) + per_loop
    if len(per_loop) != len(chain):
      raise ValueError(f"{inst.opcode.name.lower()}: offset steps for {len(per_loop)} loops, "
                       f"inside {len(chain)}")
    for loop, given in zip(chain, per_loop):
      for key, step in given.items():
        if isinstance(step, TileStep):
          _check_tile_step(inst, key, step, loop.count)
        elif key not in stepped_values(inst) and not isinstance(inst.operands.get(key), HbmAP):
          raise ValueError(f"{inst.opcode.name.lower()}: a step for {key!r}, not an HBM operand")
      if given:
        inst.steps_of(loop)[0].update(given)

  def _emit(self, opcode, stream, debug, **operands):
    debug = self._debug_id(debug)
    inst = Instruction(opcode, None if stream is None else on_core(int(stream), self._core), debug,
                       operands, loop=self._loop, core=self._core, part=self._part)
    self.instructions.append(inst)
    self.blocks[self.block].instructions.append(inst)
    return inst
