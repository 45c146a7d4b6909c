"""torch.autograd.Function pairings of the library's kernels with their backward kernels, for
torch tensors on the trn XLA device (torch_xla, PJRT_DEVICE=TRN): the forward and the backward
are each the kernel's custom call in torch_xla's graph (jax_trn.nki's torch path).

This module imports torch; jax_trn.kernels does not import it, so JAX users need no torch.

    from jax_trn.kernels.torch_autograd import flash_attention
    out = flash_attention(q, k, v, causal=True)   # q [H, S, d], k, v [Hkv, S, d] on the device
    out.sum().backward()                          # q.grad, k.grad, v.grad from the backward kernel

`softmax(x)` likewise pairs the softmax kernel with its backward kernel.
"""

import torch

from jax_trn.kernels.attention import flash_attention_kernel
from jax_trn.kernels.attention_backward import flash_attention_backward_kernel
from jax_trn.kernels.softmax import softmax_kernel
from jax_trn.kernels.softmax_backward import softmax_backward_kernel


class FlashAttention(torch.autograd.Function):
  """softmax(q k^T / sqrt(d) [+ causal mask]) v; the backward kernel is its backward."""

  @staticmethod
  def forward(ctx, q, k, v, causal):
    out, lse = flash_attention_kernel(q, k, v, causal=causal, with_lse=True)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal = causal
    return out

  @staticmethod
  def backward(ctx, d_out):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = flash_attention_backward_kernel(q, k, v, out, d_out.to(q.dtype).contiguous(),
                                                 lse, causal=ctx.causal)
    return dq, dk, dv, None


def flash_attention(q, k, v, causal: bool = False):
  """Differentiable flash attention on torch_xla tensors (FlashAttention.apply)."""
  return FlashAttention.apply(q, k, v, causal)


class Softmax(torch.autograd.Function):
  """Softmax over the last axis; the backward kernel, reading the output, is its backward."""

  @staticmethod
  def forward(ctx, x):
    y = softmax_kernel(x)
    ctx.save_for_backward(y)
    return y

  @staticmethod
  def backward(ctx, d_y):
    (y,) = ctx.saved_tensors
    return softmax_backward_kernel(y, d_y.to(y.dtype).contiguous())


def softmax(x):
  """Differentiable softmax over the last axis on torch_xla tensors (Softmax.apply)."""
  return Softmax.apply(x)


__all__ = ["FlashAttention", "Softmax", "flash_attention", "softmax"]
