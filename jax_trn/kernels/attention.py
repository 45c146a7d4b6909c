"""Flash attention forward: softmax(q k^T * scale [+ causal mask]) v per head, with grouped-query
heads (q head h reads kv head h // (H / Hkv)), never materialising the score matrix.

Per kv head, k is transposed once into SBUF (d on partitions) and v kept as 128-row tiles with a
column of ones appended, so the P @ V matmul also yields the softmax denominators (no VectorE
row sum). Per 128 query rows, two passes over the keys in blocks of 512: the first computes the
scores on TensorE and their row max on VectorE; the second recomputes them (TensorE has the
time; the engines that would rescale a running output online do not), ScalarE exponentiates
them with the scale and max folded into its scale and bias, TensorE transposes P and
accumulates [P @ V | row sums] over every key block in one PSUM group; pass 1 of the next query
block is issued before pass 2 of this one so the engines overlap. A causal kernel skips key
blocks wholly after the queries and adds a -1e30 mask to the diagonal ones by one more matmul
into the same PSUM group (identity @ mask).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import tiles

KEY_BLOCK = 512
MASKED = -1.0e30  # added to the scores of keys after the query (exp gives exactly 0)


def reference(q, k, v, causal=False):
  """q [H, S, d], k and v [Hkv, S, d] with H a multiple of Hkv."""
  heads, seq, dim = q.shape
  group = heads // k.shape[0]
  k = jnp.repeat(k, group, axis=0).astype(jnp.float32)
  v = jnp.repeat(v, group, axis=0).astype(jnp.float32)
  scores = jnp.einsum("hqd,hkd->hqk", q.astype(jnp.float32), k) / np.sqrt(dim)
  if causal:
    scores = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), scores, -jnp.inf)
  return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v).astype(q.dtype)


def transposed(rows, dtype):
  """rows [n <= 128, d] (SBUF) as [d, n] in SBUF, through a TensorE transpose."""
  n, d = rows.shape
  flipped = nl.ndarray((d, n), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_transpose(dst=flipped, data=rows)
  result = nl.ndarray((d, n), dtype=dtype, buffer=nl.sbuf)
  nisa.tensor_copy(dst=result, src=flipped, engine=nisa.engine.scalar)
  return result


def _load_kv(k, v, head, seq, dim):
  """k[head].T as [d, seq] and v[head] as 128-row tiles [rows, d + 1] ending in a ones column."""
  k_t = nl.ndarray((dim, seq), dtype=k.dtype, buffer=nl.sbuf)
  v_tiles = []
  for s0, sn in tiles(seq, nl.tile_size.pmax):
    rows = nl.ndarray((sn, dim), dtype=k.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=k[head, s0:s0 + sn, :])
    flipped = nl.ndarray((dim, sn), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=rows)
    nisa.tensor_copy(dst=k_t[:, s0:s0 + sn], src=flipped)
    v_ext = nl.ndarray((sn, dim + 1), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_ext[:, 0:dim], src=v[head, s0:s0 + sn, :])
    nisa.memset(dst=v_ext[:, dim:dim + 1], value=1.0)
    v_tiles.append(v_ext)
  return k_t, v_tiles


def causal_mask(masks: dict, offset: int, qn: int, kn: int):
  """[qn, kn] bf16: 0 where key k0 + j <= query q0 + p (offset = q0 - k0), -1e30 elsewhere;
  one constant per distinct offset and shape."""
  key = (offset, qn, kn)
  if key not in masks:
    mask = nl.ndarray((qn, kn), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.iota(dst=mask, pattern=[[-1, kn]], offset=offset, channel_multiplier=1)
    nisa.tensor_scalar(dst=mask, data=mask, op0=nl.less, operand0=0.0, op1=nl.multiply,
                       operand1=MASKED)
    masks[key] = mask
  return masks[key]


def _scores(q_t, k_t, k0, kn, identity, mask):
  """q_t.T @ k_t[:, block] into PSUM, plus the causal mask (identity.T @ mask accumulated in
  the same group) when one is given."""
  qn = q_t.shape[1]
  scores = nl.ndarray((qn, kn), dtype=nl.float32, buffer=nl.psum)
  nisa.nc_matmul(dst=scores, stationary=q_t, moving=k_t[:, k0:k0 + kn])
  if mask is not None:
    nisa.nc_matmul(dst=scores, stationary=identity[0:qn, 0:qn], moving=mask)
  return scores


def _probs(scores, scale, neg_max, dtype):
  """exp(scale * scores - max) on ScalarE, in the matmul dtype."""
  probs = nl.ndarray(scores.shape, dtype=dtype, buffer=nl.sbuf)
  nisa.activation(dst=probs, op=nl.exp, data=scores, scale=scale, bias=neg_max)
  return probs


def identity_tile():
  """The [128, 128] bf16 identity (a matmul with it adds its moving operand to a PSUM tile)."""
  pmax = nl.tile_size.pmax
  identity = nl.ndarray((pmax, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
  nisa.iota(dst=identity, pattern=[[-1, pmax]], offset=0, channel_multiplier=1)
  nisa.tensor_scalar(dst=identity, data=identity, op0=nl.equal, operand0=0.0)
  return identity


def _row_max(q, head, q0, qn, k_t, identity, masks, causal, scale):
  """Pass 1 of one query block: its rows and transposed rows, key blocks and masks, and
  -scale * (row max of the scores) over every key block."""
  dim = q.shape[2]
  rows = nl.ndarray((qn, dim), dtype=q.dtype, buffer=nl.sbuf)
  nisa.dma_copy(dst=rows, src=q[head, q0:q0 + qn, :])
  q_t = transposed(rows, q.dtype)
  blocks = tiles(q0 + qn if causal else q.shape[1], KEY_BLOCK)
  block_masks = [causal_mask(masks, q0 - k0, qn, kn) if causal and k0 + kn > q0 + 1 else None
                 for k0, kn in blocks]
  block_max = nl.ndarray((qn, len(blocks)), dtype=nl.float32, buffer=nl.sbuf)
  for b, ((k0, kn), mask) in enumerate(zip(blocks, block_masks)):
    scores = _scores(q_t, k_t, k0, kn, identity, mask)
    nisa.tensor_reduce(dst=block_max[:, b:b + 1], op=nl.max, data=scores, axis=1)
  neg_max = nl.ndarray((qn, 1), dtype=nl.float32, buffer=nl.sbuf)
  nisa.tensor_reduce(dst=neg_max, op=nl.max, data=block_max, axis=1, negate=True)
  nisa.tensor_scalar(dst=neg_max, data=neg_max, op0=nl.multiply, operand0=scale)
  return q_t, blocks, block_masks, neg_max


def _accumulate(q_t, blocks, block_masks, neg_max, k_t, v_tiles, identity, scale, dtype):
  """Pass 2 of one query block: [P @ V | row sums] in one PSUM group, software-pipelined so
  TensorE scores key block b + 1 while block b is transposed."""
  qn, dim = q_t.shape[1], k_t.shape[0]
  pmax = nl.tile_size.pmax
  acc = nl.ndarray((qn, dim + 1), dtype=nl.float32, buffer=nl.psum)
  probs = _probs(_scores(q_t, k_t, *blocks[0], identity, block_masks[0]), scale, neg_max, dtype)
  for b, (k0, kn) in enumerate(blocks):
    following = None
    if b + 1 < len(blocks):
      following = _scores(q_t, k_t, *blocks[b + 1], identity, block_masks[b + 1])
    chunks = tiles(kn, pmax)
    flipped = []
    for c0, cn in chunks:
      flipped.append(nl.ndarray((cn, qn), dtype=nl.float32, buffer=nl.psum))
      nisa.nc_transpose(dst=flipped[-1], data=probs[:, c0:c0 + cn])
    if following is not None:
      probs = _probs(following, scale, neg_max, dtype)
    for c, ((c0, cn), f) in enumerate(zip(chunks, flipped)):
      probs_t = nl.ndarray((cn, qn), dtype=dtype, buffer=nl.sbuf)
      # Half the copies on ScalarE (VectorE also takes every row max).
      nisa.tensor_copy(dst=probs_t, src=f,
                       engine=nisa.engine.scalar if c % 2 else nisa.engine.vector)
      nisa.nc_matmul(dst=acc, stationary=probs_t, moving=v_tiles[(k0 + c0) // pmax])
  return acc


@nki.jit
def flash_attention_kernel(q, k, v, causal=False, with_lse=False):
  """with_lse: also return logsumexp(q k^T * scale) [H, S] in fp32 (what the backward needs)."""
  heads, seq, dim = q.shape
  kv_heads = k.shape[0]
  scale = 1.0 / float(np.sqrt(dim))
  out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
  lse = nl.ndarray((heads, seq), dtype=nl.float32, buffer=nl.shared_hbm) if with_lse else None
  identity = identity_tile()
  masks = {}
  for kv_head in range(kv_heads):
    k_t, v_tiles = _load_kv(k, v, kv_head, seq, dim)
    work = [(head, q0, qn) for head in range(kv_head * (heads // kv_heads),
                                             (kv_head + 1) * (heads // kv_heads))
            for q0, qn in tiles(seq, nl.tile_size.pmax)]
    # Pass 1 of the next query block is issued before pass 2 of this one, so VectorE's row
    # maxima overlap ScalarE's exponentials.
    maxima = _row_max(q, *work[0], k_t, identity, masks, causal, scale)
    for w, (head, q0, qn) in enumerate(work):
      q_t, blocks, block_masks, neg_max = maxima
      if w + 1 < len(work):
        maxima = _row_max(q, *work[w + 1], k_t, identity, masks, causal, scale)
      acc = _accumulate(q_t, blocks, block_masks, neg_max, k_t, v_tiles, identity, scale,
                        q.dtype)
      inverse = nl.ndarray((qn, 1), dtype=nl.float32, buffer=nl.sbuf)
      nisa.reciprocal(dst=inverse, data=acc[:, dim:dim + 1])
      result = nl.ndarray((qn, dim), dtype=q.dtype, buffer=nl.sbuf)
      nisa.tensor_scalar(dst=result, data=acc[:, 0:dim], op0=nl.multiply, operand0=inverse)
      nisa.dma_copy(dst=out[head, q0:q0 + qn, :], src=result)
      if with_lse:  # max + log(sum)
        row_lse = nl.ndarray((qn, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=row_lse, op=nl.log, data=acc[:, dim:dim + 1])
        nisa.tensor_tensor(dst=row_lse, data1=row_lse, data2=neg_max, op=nl.subtract)
        nisa.dma_copy(dst=lse[head, q0:q0 + qn], src=row_lse)
  return (out, lse) if with_lse else out
