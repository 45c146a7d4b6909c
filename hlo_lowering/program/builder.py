"""ProgramBuilder: the compiler's way to write a NeuronCore program. One method per instruction;
arguments are validated here (partition rules, element counts, engine constraints) so a compiler
bug surfaces with a ValueError at build time instead of as a loader error later.

Instructions are appended in program order; the back end (hlo_lowering.backend) then places the
symbolic SBUF/PSUM buffers (`new_buffer`), gives every DMA without a queue its queue and derives
every semaphore wait, before `serialize`."""

import math

import numpy as np

from .buffers import Buffer
from .enums import (ARG_REDUCE_SELECT, Alu, ControlOp, DType, Memory, Opcode, PSUM_BANK_BYTES,
                    REDUCE_OPS, SCATTER_CLAMP, SCATTER_OPS, SORT_FLOAT_CANONICAL, Stream, TensorKind,
                    WINDOW_SELECT_OPS)
from .instructions import Block, DebugEntry, Exit, Instruction, MATMUL_START, MATMUL_STOP, Tensor
from .operands import HbmAP, Scalar, TileAP
from .writer import serialize

TARGETS = ("trn1", "trn2", "trn3")
MATMUL_DTYPES = (DType.F32, DType.BF16, DType.F16, DType.F8E4M3FN, DType.F8E5M2)


def window_positions(base: int, size: int, stride: int, base_dilation: int,
                     window_dilation: int, pad_low: int, pad_high: int) -> int:
  """How many windows fit along one dim of a padded, dilated base (XLA's reduce_window)."""
  padded = (base - 1) * base_dilation + 1 + pad_low + pad_high if base else pad_low + pad_high
  span = (size - 1) * window_dilation + 1
  return 0 if padded < span else (padded - span) // stride + 1


def _window_values(where, window, base_shape, out_shape) -> list:
  window = [tuple(int(v) for v in w) for w in window]
  if len(window) != len(base_shape) or len(out_shape) != len(base_shape):
    raise ValueError(f"{where}: {len(window)} window dims for base {list(base_shape)} and "
                     f"result {list(out_shape)}")
  for w, base, out in zip(window, base_shape, out_shape):
    if min(w[:4]) < 1 or min(w[4:]) < 0 or window_positions(base, *w) != out:
      raise ValueError(f"{where}: window {w} over {base} elements does not give {out}")
  return [v for w in window for v in w]


def _check_op(op, arity: int, data_dtype: DType, where: str) -> Alu:
  try:
    op = Alu(op)
  except ValueError:
    raise ValueError(f"{where}: unknown ALU op {op}") from None
  if op.arity != arity:
    raise ValueError(f"{where}: {op.name} takes {op.arity} operands, not {arity}")
  floating = DType(data_dtype).is_float
  if floating and op.is_integer_only:
    raise ValueError(f"{where}: {op.name} needs integer data, got {DType(data_dtype).name}")
  if not floating and op.is_float_only:
    raise ValueError(f"{where}: {op.name} needs float data, got {DType(data_dtype).name}")
  return op


def _same_count(where: str, *aps):
  counts = [ap.num_elements for ap in aps]
  if len(set(counts)) != 1:
    raise ValueError(f"{where}: element counts differ: {counts}")


def _same_tile_shape(where: str, *aps):
  parts = [ap.partition_count for ap in aps]
  if len(set(parts)) != 1:
    raise ValueError(f"{where}: partition counts differ: {parts}")
  _same_count(where, *aps)


def _tile(ap, where: str) -> TileAP:
  if not isinstance(ap, TileAP):
    raise ValueError(f"{where}: expected a TileAP, got {type(ap).__name__}")
  return ap


def _scalar_operand(value, src: TileAP, where: str):
  if isinstance(value, Scalar):
    return value
  tile = _tile(value, where)
  if tile.partition_count != src.partition_count or tile.free_size != 1:
    raise ValueError(f"{where}: a per-partition scalar must be [{src.partition_count}, 1], "
                     f"got {list(tile.shape)}")
  return tile


class ProgramBuilder:
  def __init__(self, target: str = "trn2", source: str = ""):
    if target not in TARGETS:
      raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    self.target = target
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
    self._default_debug = None

  @property
  def streams(self) -> dict:
    """The current block's streams: stream id -> [Instruction]."""
    return self.blocks[self.block].streams

  # --- blocks and control flow --------------------------------------------------------------

  def new_block(self) -> int:
    """A new empty block (ending the program until given an exit); returns its index."""
    self.blocks.append(Block())
    return len(self.blocks) - 1

  def set_block(self, index: int) -> None:
    """Instructions emitted from now on go to block `index`."""
    if not 0 <= index < len(self.blocks):
      raise ValueError(f"block {index} does not exist ({len(self.blocks)} blocks)")
    self.block = index

  def jump(self, target: int, debug=None) -> None:
    """The current block continues with block `target`."""
    self._set_exit(Exit(ControlOp.JUMP, self._debug_id(debug), None, [target]))

  def branch(self, predicate, if_true: int, if_false: int, debug=None) -> None:
    """The current block continues with `if_true` when the one-element `predicate` (pred or an
    integer in HBM) is nonzero, with `if_false` otherwise."""
    self._check_selector(predicate, "branch", allow_pred=True)
    self._set_exit(Exit(ControlOp.BRANCH, self._debug_id(debug), predicate, [if_true, if_false]))

  def switch(self, index, targets, debug=None) -> None:
    """The current block continues with targets[index] (an integer in HBM); an index outside
    [0, len(targets)) takes the last target, as XLA's case does."""
    targets = [int(t) for t in targets]
    if not targets:
      raise ValueError("switch: needs at least one target")
    self._check_selector(index, "switch", allow_pred=False)
    self._set_exit(Exit(ControlOp.SWITCH, self._debug_id(debug), index, targets))

  def _set_exit(self, exit_: Exit) -> None:
    block = self.blocks[self.block]
    if block.exit.op != ControlOp.END:
      raise ValueError(f"block {self.block} already ends in {block.exit.op.name.lower()}")
    for target in exit_.targets:
      if not 0 <= target < len(self.blocks):
        raise ValueError(f"{exit_.op.name.lower()}: block {target} does not exist")
    block.exit = exit_

  def _check_selector(self, ap, where: str, allow_pred: bool) -> None:
    self._check_hbm(ap, where, required=True)
    dtype = self._dtype(ap)
    if ap.num_elements != 1:
      raise ValueError(f"{where}: the selector must be one element, got {ap}")
    if dtype.is_float or (dtype == DType.PRED and not allow_pred):
      raise ValueError(f"{where}: selector dtype {dtype.name} (expected "
                       f"{'pred or ' if allow_pred else ''}an integer)")

  # --- tables -------------------------------------------------------------------------------

  def tensor(self, kind, dtype, shape, index=0, name="") -> int:
    kind = TensorKind[kind.upper()] if isinstance(kind, str) else TensorKind(kind)
    if kind == TensorKind.CONSTANT:
      raise ValueError("constants carry data: use ProgramBuilder.constant")
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
      raise ValueError(f"tensor {name!r}: negative dimension in shape {shape}")
    if kind in (TensorKind.PARAMETER, TensorKind.OUTPUT):
      taken = [t for t in self.tensors if t.kind == kind and t.index == index]
      if taken:
        raise ValueError(f"{kind.name.lower()} index {index} is already tensor {taken[0].name!r}")
    else:
      index = 0
    self.tensors.append(Tensor(name, kind, index, DType(dtype), shape))
    return len(self.tensors) - 1

  def constant(self, dtype, shape, data: bytes, name="") -> int:
    dtype = DType(dtype)
    shape = tuple(int(d) for d in shape)
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
      raise ValueError(f"constant {name!r}: {len(data)} bytes of data for {dtype.name}{list(shape)}"
                       f" which needs {expected}")
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

  def dma_copy(self, queue, dst, src, debug=None):
    """queue None: the back end's assign-dma-queues stage chooses it."""
    where = "dma_copy"
    for ap in (dst, src):
      if isinstance(ap, TileAP) and ap.memory == Memory.PSUM:
        raise ValueError(f"{where}: PSUM is not a DMA endpoint ({ap})")
    self._check_hbm(dst, where, writes=True)
    self._check_hbm(src, where)
    _same_count(where, dst, src)
    stream = None if queue is None else Stream.dma(queue)
    self._emit(Opcode.DMA_COPY, stream, debug, dst=dst, src=src)

  def matmul(self, dst, stationary, moving, start=True, stop=True, debug=None):
    where = "matmul"
    dst, stationary, moving = (_tile(a, where) for a in (dst, stationary, moving))
    if dst.memory != Memory.PSUM or dst.dtype != DType.F32:
      raise ValueError(f"{where}: dst must be an fp32 PSUM tile, got {dst}")
    for name, ap in (("stationary", stationary), ("moving", moving)):
      if ap.memory != Memory.SBUF:
        raise ValueError(f"{where}: {name} must be in SBUF, got {ap}")
      if ap.dtype not in MATMUL_DTYPES:
        raise ValueError(f"{where}: {name} dtype {ap.dtype.name} is not one of "
                         f"{[d.name for d in MATMUL_DTYPES]}")
    if stationary.partition_count != moving.partition_count:
      raise ValueError(f"{where}: stationary has K={stationary.partition_count} partitions, "
                       f"moving K={moving.partition_count}")
    m, n = stationary.free_size, moving.free_size
    if m > 128:
      raise ValueError(f"{where}: stationary free size {m} exceeds 128")
    if dst.partition_count != m or dst.free_size != n:
      raise ValueError(f"{where}: dst is {list(dst.shape)}, expected [{m} partitions, {n}]")
    low, high = dst.byte_range()
    if low // PSUM_BANK_BYTES != (high - 1) // PSUM_BANK_BYTES:
      raise ValueError(f"{where}: dst bytes [{low}, {high}) cross a 2 KiB PSUM bank")
    flags = (MATMUL_START if start else 0) | (MATMUL_STOP if stop else 0)
    self._emit(Opcode.MATMUL, Stream.PE, debug, dst=dst, stationary=stationary, moving=moving,
               flags=flags)

  def transpose(self, dst, src, debug=None):
    where = "transpose"
    dst, src = _tile(dst, where), _tile(src, where)
    if dst.memory != Memory.PSUM:
      raise ValueError(f"{where}: dst must be in PSUM, got {dst}")
    if len(src.free) != 1 or src.free_size > 128:
      raise ValueError(f"{where}: src must be [P, F <= 128] with one free dim, got {src}")
    if dst.partition_count != src.free_size or dst.free_size != src.partition_count:
      raise ValueError(f"{where}: dst is {list(dst.shape)}, expected "
                       f"[{src.free_size}, {src.partition_count}]")
    self._emit(Opcode.TRANSPOSE, Stream.PE, debug, dst=dst, src=src)

  # --- VectorE and ScalarE ------------------------------------------------------------------

  def tensor_tensor(self, op, dst, a, b_, debug=None):
    where = "tensor_tensor"
    dst, a, b_ = (_tile(x, where) for x in (dst, a, b_))
    op = _check_op(op, 2, a.dtype, where)
    _same_tile_shape(where, dst, a, b_)
    self._emit(Opcode.TENSOR_TENSOR, Stream.DVE, debug, op=op, dst=dst, a=a, b=b_)

  def tensor_scalar(self, op, dst, src, scalar, reverse=False, debug=None):
    where = "tensor_scalar"
    dst, src = _tile(dst, where), _tile(src, where)
    op = _check_op(op, 2, src.dtype, where)
    _same_tile_shape(where, dst, src)
    scalar = _scalar_operand(scalar, src, where)
    self._emit(Opcode.TENSOR_SCALAR, Stream.DVE, debug, op=op, reverse=int(bool(reverse)),
               dst=dst, src=src, scalar=scalar)

  def tensor_reduce(self, op, dst, src, debug=None):
    where = "tensor_reduce"
    dst, src = _tile(dst, where), _tile(src, where)
    op = _check_op(op, 2, src.dtype, where)
    if op not in REDUCE_OPS:
      raise ValueError(f"{where}: {op.name} is not a reduction; use one of "
                       f"{sorted(o.name for o in REDUCE_OPS)}")
    if dst.partition_count != src.partition_count or dst.free_size != 1:
      raise ValueError(f"{where}: dst must be [{src.partition_count}, 1], got {list(dst.shape)}")
    self._emit(Opcode.TENSOR_REDUCE, Stream.DVE, debug, op=op, dst=dst, src=src)

  def tensor_copy(self, dst, src, debug=None):
    where = "tensor_copy"
    dst, src = _tile(dst, where), _tile(src, where)
    _same_count(where, dst, src)
    self._emit(Opcode.TENSOR_COPY, Stream.DVE, debug, dst=dst, src=src)

  def tensor_ternary(self, op, dst, a, b_, c, debug=None):
    where = "tensor_ternary"
    dst, a, b_, c = (_tile(x, where) for x in (dst, a, b_, c))
    op = _check_op(op, 3, b_.dtype, where)
    _same_tile_shape(where, dst, a, b_, c)
    self._emit(Opcode.TENSOR_TERNARY, Stream.DVE, debug, op=op, dst=dst, a=a, b=b_, c=c)

  def tensor_unary(self, op, dst, src, debug=None):
    where = "tensor_unary"
    dst, src = _tile(dst, where), _tile(src, where)
    op = _check_op(op, 1, src.dtype, where)
    _same_tile_shape(where, dst, src)
    self._emit(Opcode.TENSOR_UNARY, Stream.DVE, debug, op=op, dst=dst, src=src)

  def activation(self, func, dst, src, scale=1.0, bias=Scalar(DType.F32, 0.0), debug=None):
    where = "activation"
    dst, src = _tile(dst, where), _tile(src, where)
    func = _check_op(func, 1, DType.F32, where)
    _same_tile_shape(where, dst, src)
    bias = _scalar_operand(bias, src, where)
    self._emit(Opcode.ACTIVATION, Stream.ACT, debug, func=func, dst=dst, src=src,
               scale=float(np.float32(scale)), bias=bias)

  # --- GpSimd general-purpose ops over HBM --------------------------------------------------

  def gp_elementwise(self, op, dst, srcs, debug=None):
    where = "gp_elementwise"
    srcs = list(srcs)
    for ap in [dst] + srcs:
      self._check_hbm(ap, where, writes=ap is dst, required=True)
    data = srcs[1] if Alu(op) in (Alu.SELECT, Alu.CLAMP) else srcs[0]
    op = _check_op(op, len(srcs), self._dtype(data), where)
    for ap in srcs:
      if ap.shape != dst.shape:
        raise ValueError(f"{where}: source dims {list(ap.shape)} differ from dst "
                         f"{list(dst.shape)} (broadcast with stride 0)")
    self._emit(Opcode.GP_ELEMENTWISE, Stream.POOL, debug, op=op, dst=dst, srcs=srcs)

  def gp_copy(self, dst, src, debug=None):
    where = "gp_copy"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(src, where, required=True)
    _same_count(where, dst, src)
    self._emit(Opcode.GP_COPY, Stream.POOL, debug, dst=dst, src=src)

  def gp_fill(self, dst, value, debug=None):
    where = "gp_fill"
    self._check_hbm(dst, where, writes=True, required=True)
    if not isinstance(value, Scalar):
      raise ValueError(f"{where}: value must be a Scalar, got {type(value).__name__}")
    self._emit(Opcode.GP_FILL, Stream.POOL, debug, dst=dst, value=value)

  def gp_iota(self, dst, dim, debug=None):
    where = "gp_iota"
    self._check_hbm(dst, where, writes=True, required=True)
    if not 0 <= dim < len(dst.dims):
      raise ValueError(f"{where}: dim {dim} out of range for {len(dst.dims)} dims")
    self._emit(Opcode.GP_IOTA, Stream.POOL, debug, dst=dst, dim=dim)

  def gp_bitcast(self, dst_tensor, src_tensor, debug=None):
    where = "gp_bitcast"
    dst_t, src_t = self._tensor(dst_tensor, where), self._tensor(src_tensor, where)
    self._check_writable(dst_tensor, where)
    sizes = [math.prod(t.shape) * DType(t.dtype).itemsize for t in (dst_t, src_t)]
    if sizes[0] != sizes[1]:
      raise ValueError(f"{where}: tensors hold {sizes[0]} and {sizes[1]} bytes")
    self._emit(Opcode.GP_BITCAST, Stream.POOL, debug, dst=dst_tensor, src=src_tensor)

  def gp_reduce(self, op, dst, src, reduced, init, debug=None):
    where = "gp_reduce"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(src, where, required=True)
    op = _check_op(op, 2, self._dtype(src), where)
    if op not in REDUCE_OPS:
      raise ValueError(f"{where}: {op.name} is not a reduction")
    if not 0 <= reduced <= len(src.dims):
      raise ValueError(f"{where}: reduced={reduced} but src has {len(src.dims)} dims")
    kept = math.prod(src.shape[:len(src.dims) - reduced])
    if dst.num_elements != kept:
      raise ValueError(f"{where}: dst has {dst.num_elements} elements; the kept dims "
                       f"{list(src.shape[:len(src.dims) - reduced])} have {kept}")
    if not isinstance(init, Scalar):
      raise ValueError(f"{where}: init must be a Scalar")
    self._emit(Opcode.GP_REDUCE, Stream.POOL, debug, op=op, dst=dst, src=src, reduced=reduced,
               init=init)

  def gp_batch_matmul(self, dst, lhs, rhs, debug=None):
    where = "gp_batch_matmul"
    for ap in (dst, lhs, rhs):
      self._check_hbm(ap, where, writes=ap is dst, required=True)
      if len(ap.dims) != 3:
        raise ValueError(f"{where}: access patterns must be 3-D [batch, rows, cols], got {ap}")
    (b, m, k), (b2, k2, n), (b3, m3, n3) = lhs.shape, rhs.shape, dst.shape
    if b != b2 or k != k2 or (b3, m3, n3) != (b, m, n):
      raise ValueError(f"{where}: shapes lhs {list(lhs.shape)} rhs {list(rhs.shape)} "
                       f"dst {list(dst.shape)} do not form [b,m,k]x[b,k,n]->[b,m,n]")
    self._emit(Opcode.GP_BATCH_MATMUL, Stream.POOL, debug, dst=dst, lhs=lhs, rhs=rhs)

  def gp_convolution(self, dst, lhs, rhs, window, feature_groups=1, batch_groups=1,
                     debug=None):
    """dst [N / batch_groups, O, Y...] = lhs [N, C, X...] (*) rhs [O, C / feature_groups, K...];
    window: one (stride, pad_low, lhs_dilation, rhs_dilation) per spatial dim."""
    where = "gp_convolution"
    for ap in (dst, lhs, rhs):
      self._check_hbm(ap, where, writes=ap is dst, required=True)
    rank = len(lhs.dims)
    if rank < 2 or len(rhs.dims) != rank or len(dst.dims) != rank or len(window) != rank - 2:
      raise ValueError(f"{where}: lhs {list(lhs.shape)}, rhs {list(rhs.shape)}, dst "
                       f"{list(dst.shape)} and {len(window)} window dims do not match")
    if (self._dtype(lhs).is_float != self._dtype(rhs).is_float
        or DType.PRED in (self._dtype(lhs), self._dtype(rhs))):
      raise ValueError(f"{where}: lhs and rhs must both be float or both integer (not pred)")
    (n, c), (o, i) = lhs.shape[:2], rhs.shape[:2]
    if (feature_groups < 1 or batch_groups < 1 or c != i * feature_groups
        or o % feature_groups or o % batch_groups or n % batch_groups
        or tuple(dst.shape[:2]) != (n // batch_groups, o)):
      raise ValueError(f"{where}: lhs {list(lhs.shape)}, rhs {list(rhs.shape)}, dst "
                       f"{list(dst.shape)} do not form a convolution with feature_groups="
                       f"{feature_groups}, batch_groups={batch_groups}")
    flat = []
    for stride, pad_low, lhs_dilation, rhs_dilation in window:
      if min(stride, lhs_dilation, rhs_dilation) < 1:
        raise ValueError(f"{where}: strides and dilations must be >= 1, got {window}")
      flat += [stride, pad_low, lhs_dilation, rhs_dilation]
    self._emit(Opcode.GP_CONVOLUTION, Stream.POOL, debug, feature_groups=feature_groups,
               batch_groups=batch_groups, window=flat, dst=dst, lhs=lhs, rhs=rhs)

  # --- GpSimd data-dependent ops (indices, arg-reductions, sorting) ---------------------------

  def gp_gather(self, dst, src, indices, debug=None):
    """dst [N, S0..Sr-1] = the window of src [D0..Dr-1] starting at indices[n, :] (clamped)."""
    where = "gp_gather"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(src, where, required=True)
    self._check_windows(where, dst, src, indices)
    self._emit(Opcode.GP_GATHER, Stream.POOL, debug, dst=dst, src=src, indices=indices)

  def gp_scatter(self, op, dst, updates, indices, bounds, debug=None):
    """Combines updates[n, S...] into the window of dst at indices[n, :], n in order."""
    where = "gp_scatter"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(updates, where, required=True)
    op = Alu(op)
    if op not in SCATTER_OPS:
      raise ValueError(f"{where}: {op.name} is not one of {sorted(o.name for o in SCATTER_OPS)}")
    if op != Alu.COPY:
      _check_op(op, 2, self._dtype(dst), where)
    if bounds not in (0, SCATTER_CLAMP):
      raise ValueError(f"{where}: bounds mode {bounds} (0 skip, 1 clamp)")
    self._check_windows(where, updates, dst, indices)
    self._emit(Opcode.GP_SCATTER, Stream.POOL, debug, op=op, bounds=bounds, dst=dst,
               updates=updates, indices=indices)

  def gp_arg_reduce(self, op, dst_value, dst_index, src_value, src_index, reduced, init_value,
                    init_index, body=0, debug=None):
    where = "gp_arg_reduce"
    if body not in (0, ARG_REDUCE_SELECT):
      raise ValueError(f"{where}: body {body} (0 JAX's comparator, 1 XLA's select form)")
    for ap in (dst_value, dst_index):
      self._check_hbm(ap, where, writes=True, required=True)
    for ap in (src_value, src_index):
      self._check_hbm(ap, where, required=True)
    op = Alu(op)
    if op not in (Alu.MAX, Alu.MIN):
      raise ValueError(f"{where}: op must be MAX or MIN, got {op.name}")
    if self._dtype(src_index).is_float:
      raise ValueError(f"{where}: the index operand must be an integer tensor")
    if src_value.shape != src_index.shape:
      raise ValueError(f"{where}: value dims {list(src_value.shape)} differ from index dims "
                       f"{list(src_index.shape)}")
    if not 0 <= reduced <= len(src_value.dims):
      raise ValueError(f"{where}: reduced={reduced} but the sources have {len(src_value.dims)} dims")
    kept = math.prod(src_value.shape[:len(src_value.dims) - reduced])
    for ap in (dst_value, dst_index):
      if ap.num_elements != kept:
        raise ValueError(f"{where}: a destination has {ap.num_elements} elements, expected {kept}")
    if not isinstance(init_value, Scalar) or not isinstance(init_index, Scalar):
      raise ValueError(f"{where}: init_value and init_index must be Scalars")
    self._emit(Opcode.GP_ARG_REDUCE, Stream.POOL, debug, op=op, body=body, dst_value=dst_value,
               dst_index=dst_index, src_value=src_value, src_index=src_index, reduced=reduced,
               init_value=init_value, init_index=init_index)

  def gp_sort(self, dsts, srcs, num_keys=1, descending=False, float_order=SORT_FLOAT_CANONICAL,
              debug=None):
    """Stable sort of every operand along the last access-pattern dim by the first num_keys."""
    where = "gp_sort"
    dsts, srcs = list(dsts), list(srcs)
    if not srcs or len(dsts) != len(srcs):
      raise ValueError(f"{where}: {len(dsts)} destinations for {len(srcs)} sources")
    if not 1 <= num_keys <= len(srcs):
      raise ValueError(f"{where}: num_keys={num_keys} with {len(srcs)} operands")
    if float_order not in (0, SORT_FLOAT_CANONICAL):
      raise ValueError(f"{where}: float order {float_order} (0 total order, 1 canonical)")
    for dst, src in zip(dsts, srcs):
      self._check_hbm(dst, where, writes=True, required=True)
      self._check_hbm(src, where, required=True)
      if dst.shape != srcs[0].shape or src.shape != srcs[0].shape:
        raise ValueError(f"{where}: every access pattern needs dims {list(srcs[0].shape)}")
      if self._dtype(dst) != self._dtype(src):
        raise ValueError(f"{where}: a destination's dtype differs from its source's")
    self._emit(Opcode.GP_SORT, Stream.POOL, debug, num_keys=num_keys,
               descending=int(bool(descending)), float_order=float_order, dsts=dsts, srcs=srcs)

  def gp_reduce_window(self, op, dst, src, init, window, debug=None):
    """dst[o] = init folded with op over o's window of src; window: one (size, stride,
    base_dilation, window_dilation, pad_low, pad_high) per dim (docs/program-format.md)."""
    where = "gp_reduce_window"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(src, where, required=True)
    op = _check_op(op, 2, self._dtype(src), where)
    if op not in REDUCE_OPS:
      raise ValueError(f"{where}: {op.name} is not a reduction")
    if self._dtype(dst) != self._dtype(src):
      raise ValueError(f"{where}: dst and src dtypes differ")
    if not isinstance(init, Scalar):
      raise ValueError(f"{where}: init must be a Scalar")
    flat = _window_values(where, window, src.shape, dst.shape)
    self._emit(Opcode.GP_REDUCE_WINDOW, Stream.POOL, debug, op=op, dst=dst, src=src, init=init,
               window=flat)

  def gp_select_and_scatter(self, select_op, op, dst, operand, source, init, window, debug=None):
    """dst = init, then each source element combined (op) onto the operand position its window
    selects (select_op: keep the current pick while select_op(current, candidate))."""
    where = "gp_select_and_scatter"
    self._check_hbm(dst, where, writes=True, required=True)
    self._check_hbm(operand, where, required=True)
    self._check_hbm(source, where, required=True)
    select_op = Alu(select_op)
    if select_op not in WINDOW_SELECT_OPS:
      raise ValueError(f"{where}: {select_op.name} is not a window selector")
    op = _check_op(op, 2, self._dtype(dst), where)
    if op not in (Alu.ADD, Alu.MAX, Alu.MIN, Alu.MUL):
      raise ValueError(f"{where}: {op.name} is not a scatter combiner")
    if self._dtype(dst) != self._dtype(source) or tuple(dst.shape) != tuple(operand.shape):
      raise ValueError(f"{where}: dst must have the source's dtype and the operand's shape")
    if any(w[2] != 1 or w[3] != 1 for w in window):
      raise ValueError(f"{where}: windows have no dilation")
    flat = _window_values(where, window, operand.shape, source.shape)
    self._emit(Opcode.GP_SELECT_AND_SCATTER, Stream.POOL, debug, select_op=select_op, op=op,
               dst=dst, operand=operand, source=source, init=init, window=flat)

  # --- output -------------------------------------------------------------------------------

  def serialize(self) -> bytes:
    """The program bytes; the back end's stages must have run (hlo_lowering.backend)."""
    for inst in self.instructions:
      if inst.stream is None:
        raise ValueError("serialize: a DMA has no queue (run hlo_lowering.backend's stages)")
    for kind in (TensorKind.PARAMETER, TensorKind.OUTPUT):
      indices = sorted(t.index for t in self.tensors if t.kind == kind)
      if indices != list(range(len(indices))):
        raise ValueError(f"{kind.name.lower()} indices {indices} are not 0..{len(indices) - 1}")
    return serialize(self.target, self.tensors, self.blocks, self.debug_entries, self.source)

  # --- helpers ------------------------------------------------------------------------------

  def _debug_id(self, debug, where="instruction") -> int:
    if debug is None:
      if self._default_debug is None:
        self._default_debug = self.debug()
      debug = self._default_debug
    if not 0 <= debug < len(self.debug_entries):
      raise ValueError(f"{where}: debug id {debug} is not in the debug table")
    return debug

  def _emit(self, opcode, stream, debug, **operands):
    debug = self._debug_id(debug, opcode.name)
    inst = Instruction(opcode, None if stream is None else int(stream), debug, operands)
    self.instructions.append(inst)
    self.blocks[self.block].instructions.append(inst)
    return inst

  def _tensor(self, index, where: str) -> Tensor:
    if not 0 <= index < len(self.tensors):
      raise ValueError(f"{where}: tensor {index} is not in the tensor table "
                       f"({len(self.tensors)} tensors)")
    return self.tensors[index]

  def _dtype(self, ap: HbmAP) -> DType:
    return DType(self._tensor(ap.tensor, "access pattern").dtype)

  def _check_windows(self, where, rows, base, indices):
    """rows [N, S0..Sr-1] of windows into base [D0..Dr-1] at indices [N, r] (integers)."""
    self._check_hbm(indices, where, required=True)
    if self._dtype(indices).is_float or self._dtype(indices) == DType.PRED:
      raise ValueError(f"{where}: indices must be an integer tensor")
    rank = len(base.dims)
    if len(rows.dims) != rank + 1 or indices.shape != (rows.shape[0], rank):
      raise ValueError(f"{where}: expected windows [N, S0..S{rank - 1}] and indices [N, {rank}] "
                       f"for a {rank}-D base; got {list(rows.shape)} and {list(indices.shape)}")
    if any(s > d for s, d in zip(rows.shape[1:], base.shape)):
      raise ValueError(f"{where}: window {list(rows.shape[1:])} exceeds {list(base.shape)}")

  def _check_writable(self, index, where):
    t = self._tensor(index, where)
    if t.kind in (TensorKind.PARAMETER, TensorKind.CONSTANT):
      raise ValueError(f"{where}: writes {TensorKind(t.kind).name.lower()} tensor {t.name!r}")

  def _check_hbm(self, ap, where, writes=False, required=False):
    if not isinstance(ap, HbmAP):
      if required:
        raise ValueError(f"{where}: expected an HbmAP, got {type(ap).__name__}")
      if not isinstance(ap, TileAP):
        raise ValueError(f"{where}: expected an HbmAP or TileAP, got {type(ap).__name__}")
      return
    t = self._tensor(ap.tensor, where)
    if writes:
      self._check_writable(ap.tensor, where)
    size = math.prod(t.shape)
    low, high = ap.element_range()
    if low < 0 or high >= size:
      raise ValueError(f"{where}: {ap} addresses elements {low}..{high} of tensor {t.name!r} "
                       f"which has {size}")
