"""jax_trn.nki.isa: NKI's engine instructions (the Beta 2 / NKI 0.7 signatures: `dst` first),
each checked against the NeuronCore's rules (rules.py) and recorded as program instructions.

Where the program format has one instruction for an NKI instruction it records that one. A few
NKI instructions do more in one step than one of ours; they are recorded as the equivalent short
sequence, computing through fp32 tiles as the engines do, and documented in docs/kernels.md:
relu/silu (+ VectorE work; activation's tensor scale and fused sum are one ScalarE
`activation_reduce`, as is square), tensor_scalar's second operator,
tensor_scalar_reduce (two VectorE instructions), tensor_reduce's
negate (+ a tensor_scalar), and memset/iota/affine_select patterns (a constant DMA'd in;
affine_select + a VectorE select). Anything else NKI has is refused with a KernelError
(docs/kernels.md).
"""

from __future__ import annotations

import enum
import itertools

import numpy as np

from hlo_lowering.program import Alu, DType, Scalar
from jax_trn.nki import ops, rules
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import PSUM, SBUF, NkiTensor
from jax_trn.nki.trace import current


class engine(enum.Enum):  # noqa: N801 (NKI's name)
  unknown = 0
  tensor = 1
  vector = 2
  scalar = 3
  gpsimd = 4
  sync = 5


class reduce_cmd(enum.Enum):  # noqa: N801
  idle = 0
  reset = 1
  reduce = 2
  reset_reduce = 3


_Engine, _ReduceCmd = engine, reduce_cmd


def _refuse(what: str, why: str):
  raise kernel_error(f"{what} is not supported by jax_trn.nki: {why} (docs/kernels.md)")


def _scratch(like: NkiTensor, dtype=np.float32) -> NkiTensor:
  return current().new_tile(SBUF, like.shape, np.dtype(dtype))


def _scalar_operand(value, data: NkiTensor, what: str):
  """A float/int immediate (in data's compute domain) or a [P, 1] tile: one value per partition."""
  if isinstance(value, NkiTensor):
    rules.tile(value, what)
    if value.shape[0] != data.shape[0] or value.free_size != 1:
      raise kernel_error(f"{what} {value.describe()} must be [{data.shape[0]}, 1] (one value per "
                         "partition)")
    return value.tile_ap()
  if isinstance(value, (bool, int, float, np.number)):
    return (Scalar(DType.F32, float(value)) if rules.is_float(data.dtype)
            else Scalar(DType.S32, int(value)))
  raise kernel_error(f"{what} must be a number or a [P, 1] tensor, got {type(value).__name__}")


def _same_shape(what: str, dst: NkiTensor, *srcs: NkiTensor) -> None:
  for src in srcs:
    rules.same_partitions(what, dst, src)
    rules.same_elements(what, dst, src)


# --- data movement --------------------------------------------------------------------------

def dma_copy(dst, src, dst_rmw_op=None, oob_mode=None, dge_mode=None, name=None):
  if dst_rmw_op is not None:
    _refuse("dma_copy(dst_rmw_op=...)", "DMA read-modify-write has no program instruction")
  rules.dma(dst, src)
  current().emit("dma_copy", dst=dst.ap(), src=src.ap())


def tensor_copy(dst, src, engine=engine.unknown, name=None):  # noqa: A002
  rules.tile(dst, "tensor_copy dst")
  rules.tile(src, "tensor_copy src")
  _same_shape("tensor_copy", dst, src)
  if engine == _Engine.scalar:
    current().emit("activation", func=Alu.COPY, dst=dst.tile_ap(), src=src.tile_ap())
  elif engine in (_Engine.unknown, _Engine.vector):
    current().emit("tensor_copy", dst=dst.tile_ap(), src=src.tile_ap())
  else:
    _refuse(f"tensor_copy(engine={engine.name})", "tile copies run on VectorE or ScalarE")


def memset(dst, value, engine=engine.unknown, name=None):  # noqa: A002
  """Every element of dst = value: a one-element constant broadcast into the tile by DMA (into
  an SBUF staging tile, then copied, for PSUM)."""
  rules.tile(dst, "memset dst")
  trace = current()
  constant = trace.constant(np.array([value]).astype(dst.dtype))
  if dst.buffer == PSUM:
    staging = trace.new_tile(SBUF, dst.shape, dst.dtype)
    memset(staging, value)
    trace.emit("tensor_copy", dst=dst.tile_ap(), src=staging.tile_ap())
    return
  broadcast = constant.hbm_ap()
  dims = tuple((0, n) for n in dst.shape)
  trace.emit("dma_copy", dst=dst.tile_ap(), src=type(broadcast)(broadcast.tensor, 0, dims))


def _affine_values(dst: NkiTensor, pattern, offset, channel_multiplier) -> np.ndarray:
  """offset + p * channel_multiplier + sum(step * i) over the pattern's [step, count] dims."""
  pattern = [tuple(int(v) for v in dim) for dim in pattern]
  counts = [n for _, n in pattern]
  if int(np.prod(counts)) != dst.free_size:
    raise kernel_error(f"pattern {pattern} gives {int(np.prod(counts))} elements per partition; "
                       f"dst {dst.describe()} has {dst.free_size}")
  values = np.full((dst.shape[0],) + tuple(counts), int(offset), dtype=np.int64)
  values += (np.arange(dst.shape[0]) * int(channel_multiplier)).reshape((-1,) + (1,) * len(counts))
  for axis, (step, n) in enumerate(pattern):
    shape = [1] * (len(counts) + 1)
    shape[axis + 1] = n
    values += (np.arange(n) * step).reshape(shape)
  return values.reshape(dst.shape)


def _load_constant(dst: NkiTensor, values: np.ndarray) -> None:
  constant = current().constant(values.astype(dst.dtype))
  current().emit("dma_copy", dst=dst.tile_ap(), src=constant.hbm_ap())


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
  rules.tile(dst, "iota dst", (SBUF,))
  _load_constant(dst, _affine_values(dst, pattern, offset, channel_multiplier))


def affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value,
                  cmp_op=None, name=None):
  """dst = cmp_op(affine value, 0) ? on_true_tile : on_false_value."""
  rules.tile(dst, "affine_select dst")
  rules.tile(on_true_tile, "affine_select on_true_tile")
  _same_shape("affine_select", dst, on_true_tile)
  compare = {Alu.EQ: np.equal, Alu.NE: np.not_equal, Alu.GT: np.greater,
             Alu.GE: np.greater_equal, Alu.LT: np.less, Alu.LE: np.less_equal}
  alu = Alu.EQ if cmp_op is None else ops.binary_alu(cmp_op, "affine_select cmp_op")
  if alu not in compare:
    raise kernel_error(f"affine_select cmp_op {cmp_op!r} is not a comparison")
  trace = current()
  mask = trace.new_tile(SBUF, dst.shape, np.dtype(np.uint8))
  values = _affine_values(dst, pattern, offset, channel_multiplier)
  _load_constant(mask, compare[alu](values, 0).astype(np.uint8))
  fill = trace.new_tile(SBUF, dst.shape, on_true_tile.dtype)
  memset(fill, on_false_value)
  trace.emit("tensor_ternary", op=Alu.SELECT, dst=dst.tile_ap(), a=mask.tile_ap(),
             b_=on_true_tile.tile_ap(), c=fill.tile_ap())


# --- TensorE --------------------------------------------------------------------------------

def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=None, name=None):
  """dst (PSUM, fp32) = stationary.T @ moving; accumulates into dst while a group into it is
  open (accumulate=None), or as `accumulate` says."""
  if is_transpose:
    _refuse("nc_matmul(is_transpose=True)", "use nisa.nc_transpose")
  if tile_position or tile_size:
    _refuse("nc_matmul(tile_position=...)", "TensorE row/column tiling is not modeled")
  if perf_mode not in (None, 0) and getattr(perf_mode, "name", "none") != "none":
    _refuse(f"nc_matmul(perf_mode={perf_mode})", "performance modes are not modeled")
  trace = current()
  rules.matmul(trace, dst, stationary, moving)
  trace.emit_matmul(dst.tile_ap(), stationary.tile_ap(), moving.tile_ap(), accumulate)


def nc_transpose(dst, data, engine=engine.unknown, name=None):  # noqa: A002
  if engine not in (_Engine.unknown, _Engine.tensor):
    _refuse(f"nc_transpose(engine={engine.name})", "transposes run on TensorE")
  rules.transpose(dst, data)
  current().emit("transpose", dst=dst.tile_ap(), src=data.tile_ap())


# --- ScalarE --------------------------------------------------------------------------------

def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
  """dst = op(data * scale + bias); with reduce_res, also reduce_res = sum over the free dims of
  the activated (fp32) values."""
  rules.tile(dst, "activation dst")
  rules.tile(data, "activation data")
  _same_shape("activation", dst, data)
  rules.float_data("activation", data)
  function = ops.resolve(op, "activation op", (ops.UNARY,))
  if reduce_cmd not in (_ReduceCmd.idle, _ReduceCmd.reset_reduce):
    _refuse(f"activation(reduce_cmd={reduce_cmd.name})",
            "ScalarE's reduce registers are not carried across instructions")
  if reduce_res is not None:
    if reduce_op is not None and ops.binary_alu(reduce_op, "activation reduce_op") != Alu.ADD:
      raise kernel_error("activation reduce_op must be nl.add (ScalarE sums the activated data)")
    rules.tile(reduce_res, "activation reduce_res")
    if reduce_res.shape[0] != dst.shape[0] or reduce_res.free_size != 1:
      raise kernel_error(f"activation reduce_res {reduce_res.describe()} must be "
                         f"[{dst.shape[0]}, 1]")
  trace = current()
  scale_operand = _scalar_operand(scale, data, "activation scale")
  bias_operand = Scalar(DType.F32, 0.0) if bias is None else _scalar_operand(bias, data,
                                                                             "activation bias")
  if function.alu is None:  # relu/silu: the affine part on ScalarE, the rest (and the sum) after
    activated = dst if reduce_res is None or dst.dtype == np.float32 else _scratch(dst)
    _activate_decomposed(function, activated, data, scale_operand, bias_operand)
    if reduce_res is not None:
      if activated is not dst:
        trace.emit("tensor_copy", dst=dst.tile_ap(), src=activated.tile_ap())
      trace.emit("tensor_reduce", op=Alu.ADD, dst=reduce_res.tile_ap(), src=activated.tile_ap())
    return
  if reduce_res is None and isinstance(scale_operand, Scalar):
    trace.emit("activation", func=function.alu, dst=dst.tile_ap(), src=data.tile_ap(),
               scale=scale_operand.value, bias=bias_operand)
    return
  # One ScalarE activation_reduce: a tensor scale and, in the same pass, the row sum of the
  # activated fp32 values before their rounding to dst's dtype, as the chip's 32-bit reduce
  # registers take it (through an fp32 tile when reduce_res is narrower).
  total = (None if reduce_res is None else reduce_res if reduce_res.dtype == np.float32
           else _scratch(reduce_res))
  trace.emit("activation_reduce", func=function.alu, dst=dst.tile_ap(), src=data.tile_ap(),
             scale=scale_operand, bias=bias_operand,
             dst_sum=None if total is None else total.tile_ap(),
             sum_before_rounding=total is not None)
  if total is not None and total is not reduce_res:
    trace.emit("tensor_copy", dst=reduce_res.tile_ap(), src=total.tile_ap())


def _activate_decomposed(function: ops.Op, dst: NkiTensor, data: NkiTensor, scale, bias) -> None:
  """relu and silu, which the ScalarE table lacks: max(x, 0) on VectorE; x · sigmoid(x)."""
  trace = current()
  affine = not (isinstance(scale, Scalar) and scale.value == 1.0
                and isinstance(bias, Scalar) and bias.value == 0.0)
  x = data
  if affine or function.name == ops.SILU:
    x = _scratch(data)
    trace.emit("activation_reduce", func=Alu.COPY, dst=x.tile_ap(), src=data.tile_ap(),
               scale=scale, bias=bias)
  if function.name == ops.RELU:
    trace.emit("tensor_scalar", op=Alu.MAX, dst=dst.tile_ap(), src=x.tile_ap(),
               scalar=Scalar(DType.F32, 0.0))
  else:  # silu(x) = x * sigmoid(x)
    gate = _scratch(data)
    trace.emit("activation", func=Alu.LOGISTIC, dst=gate.tile_ap(), src=x.tile_ap())
    trace.emit("tensor_tensor", op=Alu.MUL, dst=dst.tile_ap(), a=x.tile_ap(), b_=gate.tile_ap())


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
  activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
             reduce_cmd=_ReduceCmd.reset_reduce)


# --- VectorE --------------------------------------------------------------------------------

def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):  # noqa: A002
  if engine not in (_Engine.unknown, _Engine.vector):
    _refuse(f"tensor_tensor(engine={engine.name})", "elementwise tile ops run on VectorE")
  for what, t in (("dst", dst), ("data1", data1), ("data2", data2)):
    rules.tile(t, f"tensor_tensor {what}")
  _same_shape("tensor_tensor", dst, data1, data2)
  rules.not_both_psum("tensor_tensor", data1, data2)
  current().emit("tensor_tensor", op=ops.binary_alu(op, "tensor_tensor op"), dst=dst.tile_ap(),
                 a=data1.tile_ap(), b_=data2.tile_ap())


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=engine.unknown, name=None):  # noqa: A002
  """dst = (data op0 operand0) op1 operand1, the first result kept in fp32."""
  rules.tile(dst, "tensor_scalar dst")
  rules.tile(data, "tensor_scalar data")
  _same_shape("tensor_scalar", dst, data)
  trace = current()
  first = dst if op1 is None else _scratch(data, np.float32 if rules.is_float(data.dtype)
                                           else data.dtype)
  trace.emit("tensor_scalar", op=ops.binary_alu(op0, "tensor_scalar op0"), dst=first.tile_ap(),
             src=data.tile_ap(), scalar=_scalar_operand(operand0, data, "tensor_scalar operand0"),
             reverse=bool(reverse0))
  if op1 is not None:
    trace.emit("tensor_scalar", op=ops.binary_alu(op1, "tensor_scalar op1"), dst=dst.tile_ap(),
               src=first.tile_ap(),
               scalar=_scalar_operand(operand1, data, "tensor_scalar operand1"),
               reverse=bool(reverse1))


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
                         reverse1=False, name=None):
  """dst = (data op0 operand0) op1 operand1, operand0 a number or [P, 1], operand1 a tile; the
  first result kept in fp32. Float data is VectorE's one scalar_tensor_tensor instruction (its
  intermediate is in the fp32 compute domain); integer data, whose intermediate the instruction
  would keep an integer, a tensor_scalar into an fp32 tile and a tensor_tensor."""
  for what, t in (("dst", dst), ("data", data), ("operand1", operand1)):
    rules.tile(t, f"scalar_tensor_tensor {what}")
  _same_shape("scalar_tensor_tensor", dst, data, operand1)
  alu0 = ops.binary_alu(op0, "scalar_tensor_tensor op0")
  alu1 = ops.binary_alu(op1, "scalar_tensor_tensor op1")
  if rules.is_float(data.dtype) and rules.is_float(operand1.dtype):
    current().emit("scalar_tensor_tensor", op0=alu0, op1=alu1, dst=dst.tile_ap(),
                   data=data.tile_ap(),
                   operand0=_scalar_operand(operand0, data, "scalar_tensor_tensor operand0"),
                   operand1=operand1.tile_ap(), reverse0=bool(reverse0),
                   reverse1=bool(reverse1))
    return
  first = _scratch(data)
  tensor_scalar(first, data, op0, operand0, reverse0=reverse0)
  a, b = (operand1, first) if reverse1 else (first, operand1)
  current().emit("tensor_tensor", op=alu1, dst=dst.tile_ap(), a=a.tile_ap(), b_=b.tile_ap())


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False,
                         name=None):
  """dst = data op0 operand0, and reduce_res [P, 1] = reduce_op over the free dims of that
  (fp32) result."""
  rules.tile(reduce_res, "tensor_scalar_reduce reduce_res")
  if reduce_res.shape[0] != dst.shape[0] or reduce_res.free_size != 1:
    raise kernel_error(f"tensor_scalar_reduce reduce_res {reduce_res.describe()} must be "
                       f"[{dst.shape[0]}, 1]")
  result = dst if dst.dtype == np.float32 or not rules.is_float(data.dtype) else _scratch(dst)
  tensor_scalar(result, data, op0, operand0, reverse0=reverse0)
  trace = current()
  if result is not dst:
    trace.emit("tensor_copy", dst=dst.tile_ap(), src=result.tile_ap())
  trace.emit("tensor_reduce", op=ops.binary_alu(reduce_op, "tensor_scalar_reduce reduce_op"),
             dst=reduce_res.tile_ap(), src=result.tile_ap())


def reciprocal(dst, data, name=None):
  rules.tile(dst, "reciprocal dst")
  rules.tile(data, "reciprocal data")
  _same_shape("reciprocal", dst, data)
  rules.float_data("reciprocal", data)
  current().emit("tensor_unary", op=Alu.RECIPROCAL, dst=dst.tile_ap(), src=data.tile_ap())


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
  """Reduces the trailing free dims `axis` of data into dst (one instruction per element kept)."""
  rules.tile(dst, "tensor_reduce dst")
  rules.tile(data, "tensor_reduce data")
  rules.same_partitions("tensor_reduce", dst, data)
  alu = ops.binary_alu(op, "tensor_reduce op")
  axes = sorted({axis} if isinstance(axis, int) else set(axis))
  if not axes or axes[0] < 1 or axes != list(range(axes[0], data.ndim)):
    raise kernel_error(f"tensor_reduce axis {axis}: reduce the last free dims of {data.shape} "
                       f"(axes ending at {data.ndim - 1}, never the partition dim 0)")
  kept = data.shape[1:axes[0]]
  if dst.free_size != int(np.prod(kept, dtype=np.int64)):
    raise kernel_error(f"tensor_reduce dst {dst.shape} must hold {kept} per partition")
  trace = current()
  flat_dst = dst.reshape((dst.shape[0], max(1, dst.free_size)))
  for n, index in enumerate(itertools.product(*(range(k) for k in kept))):
    trace.emit("tensor_reduce", op=alu, dst=flat_dst[:, n:n + 1].tile_ap(),
               src=data[(slice(None),) + index].tile_ap())
  if negate:
    trace.emit("tensor_scalar", op=Alu.MUL, dst=dst.tile_ap(), src=dst.tile_ap(),
               scalar=Scalar(DType.F32, -1.0))


BN_STATS_FMAX = 512  # nl.tile_size.bn_stats_fmax: the elements per partition bn_stats reads


def _statistics_tiles(what: str, dst, data, dst_size: int) -> None:
  rules.tile(dst, f"{what} dst")
  rules.tile(data, f"{what} data")
  rules.same_partitions(what, dst, data)
  rules.float_data(what, data)
  rules.float_data(what, dst)
  if dst.free_size != dst_size:
    raise kernel_error(f"{what} dst {dst.describe()} must hold {dst_size} values per partition")


def bn_stats(dst, data, name=None):
  """dst [P, 6] = count, mean and count · variance of each partition's even elements of data,
  then of its odd ones (VectorE, fp32; at most nl.tile_size.bn_stats_fmax = 512 elements)."""
  _statistics_tiles("bn_stats", dst, data, 6)
  if data.free_size > BN_STATS_FMAX:
    raise kernel_error(f"bn_stats data {data.describe()} has {data.free_size} elements per "
                       f"partition, more than nl.tile_size.bn_stats_fmax ({BN_STATS_FMAX}): "
                       "call bn_stats per slice and bn_aggr over all their outputs")
  current().emit("bn_stats", dst=dst.tile_ap(), src=data.tile_ap())


def bn_aggr(dst, data, name=None):
  """dst [P, 2] = the mean and variance of everything the bn_stats outputs along data describe
  (VectorE, fp32)."""
  _statistics_tiles("bn_aggr", dst, data, 2)
  if data.free_size % 3:
    raise kernel_error(f"bn_aggr data {data.describe()} must hold (count, mean, "
                       "count · variance) triples: bn_stats outputs, 6 values each")
  current().emit("bn_aggr", dst=dst.tile_ap(), src=data.tile_ap())


def tensor_partition_reduce(*args, **kwargs):
  _refuse("tensor_partition_reduce", "cross-partition reductions: use nc_matmul with a ones "
          "vector or nc_transpose then tensor_reduce")


def _refused(name: str, why: str):
  def refused(*args, **kwargs):
    _refuse(name, why)
  refused.__name__ = name
  return refused


for _name, _why in {
    "tensor_tensor_scan": "scans have no program instruction",
    "tensor_copy_predicated": "write it as a select (affine_select / nl.where)",
    "dropout": "random numbers have no kernel instruction",
    "range_select": "no program instruction", "select_reduce": "no program instruction",
    "local_gather": "no program instruction", "max8": "no program instruction",
    "nc_find_index8": "no program instruction", "nc_match_replace8": "no program instruction",
    "nc_stream_shuffle": "no program instruction", "dma_transpose": "use nc_transpose",
    "nc_matmul_mx": "MX quantized matmul is not modeled",
    "quantize_mx": "MX quantization is not modeled", "rng": "no random number instruction",
    "rand2": "no random number instruction", "sendrecv": "collectives are not in kernels yet",
}.items():
  globals()[_name] = _refused(_name, _why)


def core_barrier(data, cores, engine=engine.unknown, name=None):
  """Both physical cores' programs reach this point before either goes on (NKI's
  core_barrier): what each wrote to HBM before it, the other may then read or overwrite."""
  if tuple(cores) != (0, 1):
    raise kernel_error(f"core_barrier cores={tuple(cores)}: only cores=(0, 1) is supported "
                       "(the two physical cores of an LNC=2 device)")
  current().core_barrier(data)


def get_nc_version():
  """The NeuronCore generation of the target being traced for ("v3" for trn2)."""
  return current().spec["core_version"].split("-")[-1]
