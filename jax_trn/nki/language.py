"""jax_trn.nki.language: NKI's tensor creation (on nl.sbuf / nl.psum / nl.shared_hbm), loop
ranges, the launch grid, dtypes and operators, plus the legacy ("Beta 1") tile-returning calls
where they map directly onto instructions (nl.load / nl.store / nl.matmul / nl.add(a, b) /
nl.exp(x) / nl.copy(x) / nl.sum(x, axis) ...).

Loops are Python loops: the kernel is traced, so every range is unrolled (affine_range and
sequential_range only say whether iterations may overlap; the back end's semaphores order what
really depends on what either way).
"""

from __future__ import annotations

import types

import ml_dtypes
import numpy as np

from jax_trn.nki import index_expr, isa, ops
from jax_trn.nki.cores import NcDim
from jax_trn.nki.device_print import device_print
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import HBM, PSUM, SBUF, NkiTensor
from jax_trn.nki.trace import current

# --- memories and dtypes --------------------------------------------------------------------

sbuf, psum = SBUF, PSUM
shared_hbm = private_hbm = hbm = HBM

bool_ = np.dtype(np.bool_)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
float16, float32 = np.dtype(np.float16), np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
tfloat32 = float32  # TensorE takes fp32 at the fp32 rate here

# The NeuronCore's tile limits (trn2; the rules check the target being traced for).
tile_size = types.SimpleNamespace(pmax=128, psum_fmax=512, gemm_stationary_fmax=128,
                                  gemm_moving_fmax=512, psum_partition_max=128,
                                  bn_stats_fmax=isa.BN_STATS_FMAX,
                                  total_available_sbuf_size=212684)

# --- operators ------------------------------------------------------------------------------

globals().update(ops.BINARY_OPS)
globals().update(ops.UNARY_OPS)
globals().update(ops.REDUCE_OPS)
mean = ops.Op("mean", ops.REDUCE_OPS["sum"].alu, ops.REDUCE)

# --- creation -------------------------------------------------------------------------------


def _dtype(dtype) -> np.dtype:
  return np.dtype(dtype)


class _PartitionDim(int):
  """nl.par_dim(n): the (Beta 1) marker of the partition dim, which must be dim 0."""


def par_dim(n):
  return _PartitionDim(n)


def nc(n):
  """nl.nc(n): a launch-grid dim spread over n physical NeuronCores (kernel[nl.nc(2)],
  kernel[nl.nc(2), 4]; cores.py)."""
  return NcDim(n)


def spmd_dim(*args, **kwargs):
  raise kernel_error("nl.spmd_dim is not supported: launch kernel[nl.nc(2), n] (or kernel[2 * n], "
                     "whose first half of programs runs on core 0) instead")


def ndarray(shape, dtype, buffer=sbuf, name=""):
  """An uninitialised tensor: a tile on sbuf/psum (dim 0 the partition dim) or an HBM tensor
  (a kernel output when returned)."""
  shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
  marked = [i for i, d in enumerate(shape) if isinstance(d, _PartitionDim) and i > 0]
  if marked:
    raise kernel_error(f"nl.par_dim in dim {marked[0]} of {shape}: the partition dim is dim 0")
  shape = tuple(int(d) for d in shape)
  if buffer == HBM:
    return current().new_hbm(shape, _dtype(dtype), name)
  if buffer not in (SBUF, PSUM):
    raise kernel_error(f"buffer {buffer!r}: expected nl.sbuf, nl.psum or nl.shared_hbm")
  return current().new_tile(buffer, shape, _dtype(dtype))


def empty_like(x, dtype=None, buffer=None, name=""):
  return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def full(shape, fill_value, dtype, buffer=sbuf, name=""):
  tile = ndarray(shape, dtype, buffer, name)
  if buffer == HBM:
    raise kernel_error("nl.full / nl.zeros on HBM: fill a tile and dma_copy it out")
  isa.memset(tile, fill_value)
  return tile


def zeros(shape, dtype, buffer=sbuf, name=""):
  return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name=""):
  return full(shape, 1, dtype, buffer, name)


def zeros_like(x, dtype=None, buffer=None, name=""):
  return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


# --- loops and the launch grid --------------------------------------------------------------


def _range(*args):
  return range(*(int(a) for a in args))


def affine_range(*args, **kwargs):
  """Iterations without loop-carried dependencies (they may overlap)."""
  return _range(*args)


def sequential_range(*args, **kwargs):
  return _range(*args)


def static_range(*args, **kwargs):
  return _range(*args)


def program_id(axis=0):
  trace = current()
  if not trace.grid:
    return 0
  if not 0 <= axis < len(trace.grid):
    raise kernel_error(f"program_id({axis}) of a {len(trace.grid)}-d launch grid {trace.grid}")
  return trace.program_index[axis]


def num_programs(axis=None):
  trace = current()
  grid = trace.grid or (1,)
  if axis is None:
    return int(np.prod(grid))
  if not 0 <= axis < len(grid):
    raise kernel_error(f"num_programs({axis}) of a {len(grid)}-d launch grid {grid}")
  return int(grid[axis])


def program_ndim():
  return len(current().grid)


arange, mgrid = index_expr.arange, index_expr.mgrid

# --- legacy tile-returning calls ------------------------------------------------------------


def load(src, dtype=None, mask=None, **kwargs):
  """A new SBUF tile holding the HBM view `src`."""
  _no_mask(mask, "nl.load")
  tile = ndarray(src.shape, dtype or src.dtype, sbuf)
  isa.dma_copy(tile, src)
  return tile


def store(dst, value, mask=None, **kwargs):
  _no_mask(mask, "nl.store")
  isa.dma_copy(dst, value)


def matmul(x, y, transpose_x=False, mask=None, **kwargs):
  """x @ y into a new PSUM tile (x.T @ y with transpose_x: x is already [K, M])."""
  _no_mask(mask, "nl.matmul")
  if not transpose_x:
    raise kernel_error("nl.matmul(transpose_x=False) needs a transpose of x: pass x as [K, M] "
                       "with transpose_x=True (or nc_transpose it first)")
  result = ndarray((x.shape[1], y.shape[1]), float32, psum)
  isa.nc_matmul(result, x, y)
  return result


def transpose(x, dtype=None, mask=None, **kwargs):
  _no_mask(mask, "nl.transpose")
  result = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, psum)
  isa.nc_transpose(result, x)
  return result


def apply(op: ops.Op, *args, dtype=None, mask=None, axis=None, keepdims=False, **kwargs):
  """The legacy call of an operator: a new SBUF tile holding op applied to the operands."""
  _no_mask(mask, repr(op))
  if op.kind == ops.REDUCE:
    if len(args) != 1 or axis is None:
      raise kernel_error(f"{op!r}(x, axis=...) reduces one tile along its free axes")
    (x,) = args
    axes = [axis] if isinstance(axis, int) else list(axis)
    kept = tuple(d for i, d in enumerate(x.shape) if i not in axes or i == 0)
    shape = (x.shape[0],) + (tuple(1 for _ in axes) if keepdims else kept[1:] or (1,))
    result = ndarray(shape, dtype or x.dtype, sbuf)
    isa.tensor_reduce(result, op, x, axis, keepdims=keepdims)
    if op.name == "mean":
      count = int(np.prod([x.shape[a] for a in axes]))
      isa.tensor_scalar(result, result, ops.BINARY_OPS["multiply"], 1.0 / count)
    return result
  tensors = [a for a in args if isinstance(a, NkiTensor)]
  if not tensors:
    raise kernel_error(f"{op!r} needs at least one tensor operand")
  result = ndarray(tensors[0].shape, dtype or tensors[0].dtype, sbuf)
  if op.kind == ops.UNARY:
    isa.activation(result, op, args[0])
  elif len(tensors) == 2:
    isa.tensor_tensor(result, args[0], args[1], op)
  else:
    reverse = not isinstance(args[0], NkiTensor)
    data, scalar = (args[1], args[0]) if reverse else (args[0], args[1])
    isa.tensor_scalar(result, data, op, scalar, reverse0=reverse)
  return result


def _no_mask(mask, what: str) -> None:
  if mask is not None:
    raise kernel_error(f"{what}(mask=...): masks are not supported; slice the tensors instead")


# --- legacy tensor syntax (NkiTensor's operators: defined here, where the calls they make are) --


def _assign(self: NkiTensor, key, value) -> None:
  """`view[...] = value`: a copy (tile to tile), a DMA (to or from HBM) or a memset."""
  view = self[key]
  if not isinstance(value, NkiTensor):
    isa.memset(view, value)
  elif view.on_chip and value.on_chip:
    isa.tensor_copy(view, value)
  else:
    isa.dma_copy(view, value)


def _operator(op: ops.Op, reflected: bool = False):
  def method(self, other):
    return apply(op, other, self) if reflected else apply(op, self, other)
  return method


NkiTensor.__setitem__ = _assign
for _dunder, _name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                       ("truediv", "divide")):
  setattr(NkiTensor, f"__{_dunder}__", _operator(ops.BINARY_OPS[_name]))
  setattr(NkiTensor, f"__r{_dunder}__", _operator(ops.BINARY_OPS[_name], reflected=True))
ops.set_legacy_call(apply)
