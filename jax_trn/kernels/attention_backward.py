"""Flash attention backward, and `flash_attention`: the forward and backward kernels as one
differentiable function (jax.custom_vjp).

The backward recomputes P = exp(q k^T * scale - lse) from the forward's logsumexp, 128 keys by
128 queries at a time (FlashAttention-2's order: key blocks outside, so dK and dV of a block
accumulate over every query block and every q head of its group in open PSUM groups, while dQ
accumulates in fp32 SBUF across key blocks):

    dV += P^T dO        dP = dO V^T        dS = P * (dP - rowsum(dO * O))
    dK += dS^T Q * scale                   dQ += dS K * scale

Every operand TensorE needs with the contraction on partitions is made once per head (q, dO, k,
v transposed on TensorE); the causal form skips query blocks wholly before a key block and masks
the diagonal ones as the forward does.
"""

import functools

import jax
import numpy as np

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.attention import (causal_mask, flash_attention_kernel, identity_tile,
                                       reference, transposed)
from jax_trn.kernels.tiles import tiles


def _rows_and_transposes(tensor, head, seq, dim):
  """tensor[head] as 128-row tiles [rows, d] and as one [d, seq] tile (TensorE transposes)."""
  rows_tiles = []
  flipped = nl.ndarray((dim, seq), dtype=tensor.dtype, buffer=nl.sbuf)
  for s0, sn in tiles(seq, nl.tile_size.pmax):
    rows = nl.ndarray((sn, dim), dtype=tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=tensor[head, s0:s0 + sn, :])
    rows_tiles.append(rows)
    block = nl.ndarray((dim, sn), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=block, data=rows)
    nisa.tensor_copy(dst=flipped[:, s0:s0 + sn], src=block)
  return rows_tiles, flipped


def _query_side(q, out, d_out, lse, head, seq, dim):
  """Per query block of one head: q and dO rows and transposes, -lse and -rowsum(dO * O)."""
  q_rows, q_t = _rows_and_transposes(q, head, seq, dim)
  d_out_rows, d_out_t = _rows_and_transposes(d_out, head, seq, dim)
  neg_lse, neg_deltas = [], []
  for (s0, sn), d_rows in zip(tiles(seq, nl.tile_size.pmax), d_out_rows):
    row_lse = nl.ndarray((sn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=row_lse, src=lse[head, s0:s0 + sn])
    nisa.tensor_scalar(dst=row_lse, data=row_lse, op0=nl.multiply, operand0=-1.0)
    neg_lse.append(row_lse)
    o_rows = nl.ndarray((sn, dim), dtype=out.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=o_rows, src=out[head, s0:s0 + sn, :])
    products = nl.ndarray((sn, dim), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=products, data1=d_rows, data2=o_rows, op=nl.multiply)
    neg_delta = nl.ndarray((sn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_delta, op=nl.add, data=products, axis=1, negate=True)
    neg_deltas.append(neg_delta)
  return q_rows, q_t, d_out_rows, d_out_t, neg_lse, neg_deltas


@nki.jit
def flash_attention_backward_kernel(q, k, v, out, d_out, lse, causal=False):
  """dq, dk, dv of flash attention given its output `out`, logsumexp `lse` and the output's
  cotangent `d_out`."""
  heads, seq, dim = q.shape
  kv_heads = k.shape[0]
  group = heads // kv_heads
  scale = 1.0 / float(np.sqrt(dim))
  pmax = nl.tile_size.pmax
  dq = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
  dk = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
  dv = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
  identity = identity_tile()
  masks = {}
  blocks = tiles(seq, pmax)
  for kv_head in range(kv_heads):
    k_rows, k_t = _rows_and_transposes(k, kv_head, seq, dim)
    _, v_t = _rows_and_transposes(v, kv_head, seq, dim)
    group_heads = range(kv_head * group, (kv_head + 1) * group)
    sides = {h: _query_side(q, out, d_out, lse, h, seq, dim) for h in group_heads}
    # fp32 dQ per query block: key block 0 (which every query block sees) writes it, later
    # key blocks add to it.
    dq_acc = {h: [nl.ndarray((qn, dim), dtype=nl.float32, buffer=nl.sbuf) for _, qn in blocks]
              for h in group_heads}
    for j, (k0, kn) in enumerate(blocks):
      dk_acc = nl.ndarray((kn, dim), dtype=nl.float32, buffer=nl.psum)
      dv_acc = nl.ndarray((kn, dim), dtype=nl.float32, buffer=nl.psum)
      # Every (head, query block) that sees this key block; the scores and dS of the next one
      # are issued before the dK/dV/dQ matmuls of this one, so the engines overlap.
      pairs = [(head, i) for head in group_heads for i, (q0, qn) in enumerate(blocks)
               if not (causal and q0 + qn <= k0)]  # (skipped: every query precedes every key)

      def scores_stage(head, i):
        """P and dS of one query block against this key block."""
        q_rows, q_t, d_out_rows, d_out_t, neg_lse, neg_delta = sides[head]
        q0, qn = blocks[i]
        scores = nl.ndarray((qn, kn), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=scores, stationary=q_t[:, q0:q0 + qn], moving=k_t[:, k0:k0 + kn])
        if causal and k0 + kn > q0 + 1:
          nisa.nc_matmul(dst=scores, stationary=identity[0:qn, 0:qn],
                         moving=causal_mask(masks, q0 - k0, qn, kn))
        d_probs = nl.ndarray((qn, kn), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=d_probs, stationary=d_out_t[:, q0:q0 + qn], moving=v_t[:, k0:k0 + kn])
        probs = nl.ndarray((qn, kn), dtype=q.dtype, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=scores, scale=scale, bias=neg_lse[i])
        centred = nl.ndarray((qn, kn), dtype=nl.float32, buffer=nl.sbuf)  # on ScalarE
        nisa.activation(dst=centred, op=nl.copy, data=d_probs, bias=neg_delta[i])
        d_scores = nl.ndarray((qn, kn), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=d_scores, data1=centred, data2=probs, op=nl.multiply)
        return probs, d_scores

      staged = scores_stage(*pairs[0])
      for p, (head, i) in enumerate(pairs):
        probs, d_scores = staged
        if p + 1 < len(pairs):
          staged = scores_stage(*pairs[p + 1])
        q_rows, _, d_out_rows, _, _, _ = sides[head]
        nisa.nc_matmul(dst=dv_acc, stationary=probs, moving=d_out_rows[i])
        nisa.nc_matmul(dst=dk_acc, stationary=d_scores, moving=q_rows[i])
        d_scores_t = transposed(d_scores, q.dtype)
        dq_part = nl.ndarray((blocks[i][1], dim), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=dq_part, stationary=d_scores_t, moving=k_rows[j])
        if j == 0:
          nisa.tensor_copy(dst=dq_acc[head][i], src=dq_part)
        else:
          nisa.tensor_tensor(dst=dq_acc[head][i], data1=dq_acc[head][i], data2=dq_part,
                             op=nl.add)
      dk_tile = nl.ndarray((kn, dim), dtype=k.dtype, buffer=nl.sbuf)
      nisa.tensor_scalar(dst=dk_tile, data=dk_acc, op0=nl.multiply, operand0=scale)
      nisa.dma_copy(dst=dk[kv_head, k0:k0 + kn, :], src=dk_tile)
      dv_tile = nl.ndarray((kn, dim), dtype=v.dtype, buffer=nl.sbuf)
      nisa.tensor_copy(dst=dv_tile, src=dv_acc, engine=nisa.engine.scalar)
      nisa.dma_copy(dst=dv[kv_head, k0:k0 + kn, :], src=dv_tile)
    for head in group_heads:
      for (q0, qn), acc in zip(blocks, dq_acc[head]):
        result = nl.ndarray((qn, dim), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=acc, op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=dq[head, q0:q0 + qn, :], src=result)
  return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def flash_attention(q, k, v, causal=False):
  """Flash attention, differentiable: the forward kernel, and the backward kernel as its VJP."""
  return flash_attention_kernel(q, k, v, causal=causal)


def _forward(q, k, v, causal):
  out, lse = flash_attention_kernel(q, k, v, causal=causal, with_lse=True)
  return out, (q, k, v, out, lse)


def _backward(causal, saved, d_out):
  q, k, v, out, lse = saved
  return flash_attention_backward_kernel(q, k, v, out, d_out.astype(q.dtype), lse, causal=causal)


flash_attention.defvjp(_forward, _backward)

__all__ = ["flash_attention", "flash_attention_backward_kernel", "reference"]
