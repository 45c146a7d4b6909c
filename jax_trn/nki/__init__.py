"""jax_trn.nki: NKI kernels (AWS's Neuron Kernel Interface) traced into NeuronCore
instructions for the simulator, with its timing model and profiler.

    from jax_trn import nki
    import jax_trn.nki.language as nl
    import jax_trn.nki.isa as nisa

    @nki.jit
    def kernel(a, b): ...

`kernel(*jax_arrays)` works inside and outside jax.jit (a custom call the compiler lowers in
place); `kernel(*numpy_arrays)` runs on the simulator, `kernel.simulate(...)` also returns the
modeled time and profile. docs/kernels.md lists what is supported and what is refused.
"""

from jax_trn.nki import isa, language
from jax_trn.nki.errors import KernelError
from jax_trn.nki.jit import Kernel, jit
from jax_trn.nki.simulate import Simulation

__all__ = ["jit", "Kernel", "KernelError", "Simulation", "isa", "language"]
