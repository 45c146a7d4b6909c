"""jax_trn.kernels: NKI kernels (jax_trn.nki) for the hot ops of transformer models, each beside
the plain-JAX reference it is tested against (tests/test_kernel_library.py) and benchmarked
against (benchmarks/nki_kernels.py: modeled time vs the compiler's lowering of the reference).

Every kernel is called like any nki.jit kernel: on jax.Arrays (inside jax.jit too) or on NumPy
arrays (simulated alone, with `kernel.simulate(...)` giving the modeled time).
`flash_attention(q, k, v, causal)` and `softmax_backward.softmax(x)` are differentiable: the
forward kernel and the backward kernel as its custom VJP.
"""

from jax_trn.kernels import (attention, attention_backward, layernorm, matmul_bias_act, rmsnorm,
                             rotary, softmax, softmax_backward)
from jax_trn.kernels.attention_backward import flash_attention

# name -> (kernel, plain-JAX reference)
KERNELS = {
    "rmsnorm": (rmsnorm.rmsnorm_kernel, rmsnorm.reference),
    "layernorm": (layernorm.layernorm_kernel, layernorm.reference),
    "softmax": (softmax.softmax_kernel, softmax.reference),
    "softmax_backward": (softmax_backward.softmax_backward_kernel, softmax_backward.reference),
    "matmul_bias_act": (matmul_bias_act.matmul_bias_act_kernel, matmul_bias_act.reference),
    "flash_attention": (attention.flash_attention_kernel, attention.reference),
    "rotary": (rotary.rotary_kernel, rotary.reference),
}

__all__ = ["KERNELS", "attention", "attention_backward", "flash_attention", "layernorm",
           "matmul_bias_act", "rmsnorm", "rotary", "softmax", "softmax_backward"]
