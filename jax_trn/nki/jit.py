"""nki.jit: a kernel function made callable on jax.Arrays (inside or outside jax.jit) and on
NumPy arrays.

Calling traces the kernel once per signature (shapes, dtypes, the non-array arguments, launch
grid, target) into a KernelProgram. On jax.Arrays the call is a `stablehlo.custom_call
@trn_kernel` carrying the traced kernel, which the compiler lowers in place
(hlo_lowering/lowering/kernel_call.py) and schedules with the rest of the program. On NumPy
arrays the kernel runs alone on the simulator; the outputs come back and `last_simulation`
keeps the modeled time and profile (`simulate` returns both).

On torch tensors on an XLA device (torch_xla, PJRT_DEVICE=TRN) the call is the same custom call
in torch_xla's graph, its target `trn_kernel.<digest of the kernel>` (torch_xla caches compiled
graphs by target name); a kernel with several outputs is a tuple-typed call there.

`kernel[n]` (or `kernel[n, m]`, `kernel[nl.nc(2), m]`) launches a grid: the kernel is traced
once per grid point, `nl.program_id(axis)` saying which; the points of the core dimension are
spread over the two physical cores of an LNC=2 device (cores.py), the rest run one after
another on their core.
"""

from __future__ import annotations

import functools
import inspect
import itertools

import ml_dtypes
import numpy as np

from hlo_lowering.lowering.kernel_call import KERNEL_TARGET, digest_target
from hlo_lowering.program.kernel_program import OUTPUT, KernelProgram
from jax_trn.nki import device_print
from jax_trn.nki import simulate as simulation
from jax_trn.nki.cores import NcDim, core_axis
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import NkiTensor
from jax_trn.nki.trace import KernelTrace


def _is_array(value) -> bool:
  return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, NkiTensor)


def _dtype_of(value) -> np.dtype:
  """The NumPy dtype of an array argument (torch dtypes by name: torch.bfloat16 -> bfloat16)."""
  dtype = value.dtype
  if type(dtype).__module__ == "torch":
    return np.dtype(ml_dtypes.bfloat16) if str(dtype) == "torch.bfloat16" else \
        np.dtype(str(dtype).removeprefix("torch."))
  return np.dtype(dtype)


def _is_torch_xla(value) -> bool:
  return (type(value).__module__ == "torch"
          and getattr(getattr(value, "device", None), "type", "") == "xla")


def _is_jax(value) -> bool:
  import jax
  return isinstance(value, jax.Array)


def _target_spec(target: str | None) -> dict:
  from jax_trn import config
  return config.target_spec(target or config.current().target)


class Kernel:
  def __init__(self, fn, grid: tuple = ()):
    self.fn = fn
    self.grid = grid
    self.last_simulation = None
    self._programs: dict = {}
    functools.update_wrapper(self, fn)

  def __getitem__(self, grid) -> "Kernel":
    grid = tuple(g if isinstance(g, NcDim) else int(g)
                 for g in (grid if isinstance(grid, tuple) else (grid,)))
    if not grid or any(g < 1 for g in grid):
      raise ValueError(f"launch grid {tuple(map(int, grid))}: every dim must be >= 1")
    core_axis(grid)  # refuses a grid that cannot be spread over the cores
    return Kernel(self.fn, grid)

  # --- tracing ------------------------------------------------------------------------------

  def trace(self, *args, target: str | None = None, **kwargs) -> KernelProgram:
    """The kernel traced for these arguments (arrays, or anything with shape and dtype)."""
    return self._program(args, kwargs, target)[0]

  def _program(self, args, kwargs, target) -> tuple[KernelProgram, str, bool]:
    """(program, its encoded payload, whether the kernel returns a tuple)."""
    spec = _target_spec(target)
    signature = tuple((tuple(a.shape), _dtype_of(a).str) if _is_array(a) else ("static", repr(a))
                      for a in args)
    key = (signature, repr(sorted(kwargs.items())), self.grid, core_axis(self.grid),
           spec["name"])
    if key not in self._programs:
      program, is_tuple = self._trace(args, kwargs, spec)
      self._programs[key] = (program, program.encode(), is_tuple)
    return self._programs[key]

  def _trace(self, args, kwargs, spec) -> tuple[KernelProgram, bool]:
    trace = KernelTrace(self.fn.__name__, spec, self.grid)
    names = list(inspect.signature(self.fn).parameters)
    call_args = [trace.add_input(tuple(a.shape), _dtype_of(a),
                                 names[i] if i < len(names) else f"arg{i}")
                 if _is_array(a) else a for i, a in enumerate(args)]
    points = list(itertools.product(*(range(g) for g in self.grid)))
    returned = trace.run_programs(points, lambda: self.fn(*call_args, **kwargs))[-1]
    if returned is None:
      raise kernel_error(f"kernel {self.fn.__name__} returns nothing: create its outputs with "
                         "nl.ndarray(shape, dtype, buffer=nl.shared_hbm) and return them "
                         "(writing into an input is not supported)", position="")
    is_tuple = isinstance(returned, (tuple, list))
    return trace.finish(list(returned) if is_tuple else [returned]), is_tuple

  # --- calling ------------------------------------------------------------------------------

  def __call__(self, *args, **kwargs):
    if any(_is_jax(a) for a in args):
      return self._call_jax(args, kwargs)
    if any(_is_torch_xla(a) for a in args):
      return self._call_torch_xla(args, kwargs)
    target = kwargs.pop("target", None)
    outputs = self.simulate(*args, target=target, **kwargs).outputs
    return tuple(outputs) if self._program(args, kwargs, target)[2] else outputs[0]

  def simulate(self, *args, target: str | None = None, **kwargs) -> simulation.Simulation:
    """Runs the kernel on NumPy arrays on the simulator: outputs, modeled time and profile."""
    program = self._program(args, kwargs, target)[0]
    arrays = [np.asarray(a) for a in args if _is_array(a)]
    result = simulation.simulate(program, arrays, _target_spec(target))
    self.last_simulation = result
    return result

  def _call_jax(self, args, kwargs):
    import jax
    program, payload, is_tuple = self._program(args, kwargs, None)
    arrays = [a for a in args if _is_array(a)]
    for array in arrays:
      if not _is_jax(array):
        raise TypeError(f"kernel {program.name}: mix of jax.Arrays and {type(array).__name__} "
                        "arguments; pass jax.Arrays (or jnp.asarray the others)")
    results = [jax.ShapeDtypeStruct(t.shape, t.dtype.numpy) for _, t in program.of_kind(OUTPUT)]
    outputs = jax.ffi.ffi_call(KERNEL_TARGET, results)(*arrays, kernel=payload)
    returned = len(outputs) - len(program.prints)
    if program.prints:  # nl.device_print's snapshots, printed on the host in kernel order
      jax.debug.callback(functools.partial(device_print.show, program.prints),
                         list(outputs[returned:]), ordered=True)
    outputs = outputs[:returned]
    return tuple(outputs) if is_tuple else outputs[0]


  def _call_torch_xla(self, args, kwargs):
    """A custom call in torch_xla's lazy graph (its HLO carries the payload as backend_config),
    its target named after the payload (torch_xla tells graphs apart by target names)."""
    import torch
    import torch_xla
    program, payload, is_tuple = self._program(args, kwargs, None)
    if program.prints:
      raise kernel_error(f"kernel {program.name} calls nl.device_print, which prints on the "
                         "NumPy and jax paths only (torch_xla has no host callback here)",
                         position="")
    tensors = [a for a in args if _is_array(a)]
    outputs = [t for _, t in program.of_kind(OUTPUT)]
    outputs = torch_xla._XLAC._xla_custom_call(
        tensors, digest_target(payload), [list(t.shape) for t in outputs],
        [getattr(torch, t.dtype.numpy.name) for t in outputs], False, payload, 1, {})
    return tuple(outputs) if is_tuple else outputs[0]


def jit(fn=None, **options):
  """Decorator: `@nki.jit` or `@nki.jit(...)` (NKI's compile options are accepted and unused:
  the kernel is traced for the simulator's target)."""
  if fn is None:
    return lambda f: Kernel(f)
  return Kernel(fn)
