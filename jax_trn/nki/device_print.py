"""nl.device_print(prefix, x): the value x has at that point of the kernel, printed when the
kernel runs, as NKI's simulator prints it.

Tracing gives each print an HBM snapshot of x (a DMA from x at that line, through an SBUF tile
when x is in PSUM, so the program order and the semaphores make it the value x holds there).
The snapshots are extra outputs of the kernel after the ones it returns
(KernelProgram.prints); the callers print them when the kernel's run is done: the NumPy path
after its simulation, the jax path through jax.debug.callback (ordered, so prints appear in
kernel order; inside jax.jit too). The snapshot's DMA is in the modeled time, as a print's
transfer to the host is on a chip.
"""

from __future__ import annotations

import numpy as np

from jax_trn.nki import isa
from jax_trn.nki.errors import kernel_error
from jax_trn.nki.tensors import PSUM, SBUF, NkiTensor
from jax_trn.nki.trace import current


def device_print(prefix, x, mask=None):
  if mask is not None:
    raise kernel_error("nl.device_print(mask=...) is not supported: print a view of the tile")
  if not isinstance(x, NkiTensor):
    raise kernel_error(f"nl.device_print({prefix!r}, {type(x).__name__}): print an NKI tensor "
                       "(an SBUF/PSUM tile or an HBM tensor, or a view of one)")
  trace = current()
  snapshot = trace.new_print(str(prefix), x.shape, x.dtype)
  source = x
  if x.buffer == PSUM:  # PSUM is no DMA endpoint: through SBUF
    source = trace.new_tile(SBUF, x.shape, x.dtype)
    isa.tensor_copy(dst=source, src=x)
  isa.dma_copy(dst=snapshot, src=source)


def show(prints: list, values: list) -> None:
  """Prints each (prefix, value) of a kernel's run."""
  for (_, prefix), value in zip(prints, values):
    print(prefix, np.asarray(value), flush=True)

