"""Flash attention forward: softmax(q k^T * scale [+ causal mask]) v per head, with grouped-query
heads (q head h reads kv head h // (H / Hkv)), never materialising the score matrix.

Per kv head, k and this core's query blocks of q are transposed once into SBUF (d on
partitions, 128-row TensorE transposes, one copy out per PSUM slot) and v is kept as 128-row
tiles with a column of ones appended, so the P @ V matmul also yields the softmax denominators
(no row sum on VectorE or ScalarE). Per 128 query rows, two passes over the keys:

  1. the row max: per block of 1024 keys (512 for fp32) the scores S (matmuls of 512 keys
     into a 2-bank PSUM slot) and one VectorE reduction, then the blocks' maxima combined
     into m (in the kernel's dtype), which one TensorE transpose turns into a row;
  2. per block, the scores again but transposed, keys on partitions: per 128-key chunk
     k_t's chunk as the stationary operand and q_t as the moving one, plus the rank-1
     (-1) x m matmul into the same PSUM group, so the slot holds S^T - m. One ScalarE exp
     over the block (the scale as its scale) writes P^T to SBUF, which is directly the
     stationary operand of the [P @ V | row sums] matmuls. The rank-1 matmuls cost TensorE
     what transposes of P would, and save the copy of P^T out of PSUM that VectorE and
     ScalarE would otherwise make (they were the bottleneck).

PSUM is allocated once, as rotating slots (Slots): three score tiles, two transpose slots in
one bank and three accumulators in one bank. Pass 1 of query block w + 2 alternates with pass
2 of block w, and the steps (one pass over one key block) are software-pipelined (_Pipeline).
A causal kernel skips keys after the queries and adds a -1e30 mask to the diagonal 128 keys
by one more matmul into their PSUM group (identity @ mask, the mask transposed in pass 2).
Launched over both physical cores (kernel[nl.nc(2)]), each core takes every other query block
of every head.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.tiles import identity_tile, tiles

SCORE_SLOTS = 3  # PSUM slots of one key block's scores (2 banks each in fp32)
FLIPPED_SLOTS = 2  # slots of transposes in one bank (q, k and the row maxima)
ACC_SLOTS = 3  # [P @ V | row sums] accumulators, all in one bank
FINISH_DELAY = 2  # pipeline steps between a block's last P @ V matmul and its output
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


def key_block(dtype) -> int:
  """Keys per block: the FLIPPED_SLOTS transpose slots of block / FLIPPED_SLOTS columns, in the
  kernel's dtype, fill one 2 KiB PSUM bank per partition."""
  return 1024 if np.dtype(dtype).itemsize <= 2 else 512


class Slots:
  """A PSUM tile [P, n, F] handed out as its n [P, F] slots in turn (NKI's buffer rotation:
  the slot used n allocations ago is the one reused, so n - 1 stay in flight)."""

  def __init__(self, tile):
    self.tile, self.count = tile, 0

  def next(self):
    slot = self.tile[:, self.count % self.tile.shape[1], :]
    self.count += 1
    return slot


class CopyRotation:
  """Spreads PSUM -> SBUF copies over VectorE and ScalarE: `vector_share` of every
  `period` copies on VectorE (which also takes every row max), the rest on ScalarE."""

  def __init__(self, vector_share: int, period: int):
    self.vector_share, self.period, self.count = vector_share, period, 0

  def copy(self, dst, src):
    on_vector = self.count % self.period < self.vector_share
    self.count += 1
    nisa.tensor_copy(dst=dst, src=src,
                     engine=nisa.engine.vector if on_vector else nisa.engine.scalar)


def transposed_rows(tensor, head, psum_slots, copies, loaded=None, row_tiles=None):
  """tensor[head] [S, d] as one SBUF tile [d, S], or only its 128-row tiles `row_tiles` side
  by side: 128-row loads (or the tiles `loaded` already holds, one per 128 rows), TensorE
  transposes in the tensor's dtype into PSUM slots [128, F] (as many as fit in one), one copy
  out per slot."""
  seq, dim = tensor.shape[1], tensor.shape[2]
  pmax = nl.tile_size.pmax
  row_tiles = tiles(seq, pmax) if row_tiles is None else row_tiles
  result = nl.ndarray((dim, sum(n for _, n in row_tiles)), dtype=tensor.dtype, buffer=nl.sbuf)
  per_slot = psum_slots.tile.shape[2] // pmax
  for g in range(0, len(row_tiles), per_slot):
    group = row_tiles[g:g + per_slot]
    flipped = psum_slots.next()[0:dim, 0:sum(n for _, n in group)]
    for i, (s0, sn) in enumerate(group):
      if loaded is None:
        rows = nl.ndarray((sn, dim), dtype=tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=tensor[head, s0:s0 + sn, :])
      else:
        rows = loaded[s0 // pmax]
      nisa.nc_transpose(dst=flipped[:, i * pmax:i * pmax + sn], data=rows)
    copies.copy(result[:, g * pmax:g * pmax + flipped.shape[1]], flipped)
  return result


def ones_extended_rows(v, head):
  """v[head] as 128-row tiles [rows, d + 1] ending in a column of ones."""
  seq, dim = v.shape[1], v.shape[2]
  result = []
  for s0, sn in tiles(seq, nl.tile_size.pmax):
    v_ext = nl.ndarray((sn, dim + 1), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_ext[:, 0:dim], src=v[head, s0:s0 + sn, :])
    nisa.memset(dst=v_ext[:, dim:dim + 1], value=1.0)
    result.append(v_ext)
  return result


def causal_mask(masks: dict, n: int):
  """[n, n] bf16: 0 where key j <= query p (the diagonal block of queries and keys), -1e30
  elsewhere; one constant per size."""
  if n not in masks:
    mask = nl.ndarray((n, n), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.iota(dst=mask, pattern=[[-1, n]], offset=0, channel_multiplier=1)
    nisa.tensor_scalar(dst=mask, data=mask, op0=nl.less, operand0=0.0, op1=nl.multiply,
                       operand1=MASKED)
    masks[n] = mask
  return masks[n]


def transposed_causal_mask(masks: dict, n: int):
  """[n keys, n queries] in bf16: causal_mask's transpose (0 where key j <= query i)."""
  if ("transposed", n) not in masks:
    mask = nl.ndarray((n, n), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.iota(dst=mask, pattern=[[1, n]], offset=0, channel_multiplier=-1)
    nisa.tensor_scalar(dst=mask, data=mask, op0=nl.less, operand0=0.0, op1=nl.multiply,
                       operand1=MASKED)
    masks[("transposed", n)] = mask
  return masks[("transposed", n)]


def masked_scores(dst, q_t, k_t, k0, q0, causal, identity, masks):
  """dst [qn, kn] (PSUM fp32) = q_t.T @ k_t[:, k0:k0 + kn]: matmuls of at most 512 keys (one
  bank each); when causal, the keys [q0, q0 + qn) (the only ones after some query of the
  block) get a matmul of their own with the mask accumulated into it."""
  qn, kn = dst.shape
  diagonal = q0 - k0 if causal and k0 <= q0 < k0 + kn else kn
  pieces = tiles(diagonal, nl.tile_size.gemm_moving_fmax)
  if diagonal < kn:
    pieces.append((diagonal, kn - diagonal))
  for a0, an in pieces:
    part = dst[:, a0:a0 + an]
    nisa.nc_matmul(dst=part, stationary=q_t, moving=k_t[:, k0 + a0:k0 + a0 + an])
    if a0 == diagonal:
      nisa.nc_matmul(dst=part, stationary=identity[0:qn, 0:qn],
                     moving=causal_mask(masks, qn))


class _QueryBlock:
  """One block of <= 128 query rows of one head and what its passes build."""

  def __init__(self, head, q_t, q0, qn, keys):
    self.head, self.q_t, self.q0, self.qn = head, q_t, q0, qn
    self.spans = tiles(keys, key_block(q_t.dtype))
    # Each span's row max, rounded to the kernel's dtype: the shift m of exp(scale (s - m))
    # needs only be near the max, and the rank-1 matmul that subtracts it takes that dtype.
    self.row_max = nl.ndarray((qn, len(self.spans)), dtype=q_t.dtype, buffer=nl.sbuf)
    self.max_col = None  # [qn, 1]: the max over every span
    self.shift_row = None  # [1, qn]: the same as one row, TensorE's moving operand
    self.acc = None


class _Step:
  """One key block of one pass of one query block: for pass 1 its scores (TensorE) and their
  row max (VectorE); for pass 2 its transposed, shifted scores (TensorE), their exponentials
  P^T (ScalarE) and the [P @ V | 1] matmuls (TensorE)."""

  def __init__(self, block: _QueryBlock, span: int, second_pass: bool):
    self.block, self.span, self.second_pass = block, span, second_pass
    self.last = span == len(block.spans) - 1
    self.k0, self.kn = block.spans[span]
    self.chunks = tiles(self.kn, nl.tile_size.pmax)  # pass 2: 128-key chunks (relative)


class _Pipeline:
  """Emits the steps software-pipelined: at step t the scores of step t + 2, the first engine
  op on the scores of step t + 1 (its row max or its exponentials) and the P @ V matmuls of
  step t. Each engine's stream runs in order, so each then always has work whose inputs an
  earlier step produced (the score tiles rotate)."""

  def __init__(self, kernel):
    self.kernel = kernel

  def run(self, steps):
    steps, self.scored = list(steps), 0
    self._score_until(steps, 2)
    if steps:
      self._first_op(steps[0])
    finishing = []
    for t, step in enumerate(steps):
      # A block's output is formed FINISH_DELAY steps after its last P @ V matmuls, so
      # ScalarE's stream does not stop at its reciprocal while TensorE still accumulates.
      while finishing and finishing[0][0] + FINISH_DELAY <= t:
        self.kernel.finish(finishing.pop(0)[1])
      self._score_until(steps, t + 3)
      if t + 1 < len(steps):
        self._first_op(steps[t + 1])
        self._score_until(steps, t + 3)
      if step.second_pass:
        finishing += [(t, block) for block in self._multiply(step)]
    for _, block in finishing:
      self.kernel.finish(block)

  def _score_until(self, steps, end: int):
    """The scores of the steps before `end` not yet issued, in order, up to the first whose
    inputs are not traced yet (pass 2 needs its block's row max: the first op of the block's
    last pass-1 step)."""
    while self.scored < min(end, len(steps)):
      step = steps[self.scored]
      if step.second_pass and step.block.max_col is None:
        return
      self._scores(step)
      self.scored += 1

  def _scores(self, step: _Step):
    k, b = self.kernel, step.block
    if not step.second_pass:
      step.scores = k.score_slots.next()[0:b.qn, 0:step.kn]
      masked_scores(step.scores, b.q_t, k.k_t, step.k0, b.q0, k.causal, k.identity, k.masks)
      return
    if b.shift_row is None:
      self._shift_row(b)
    self._transposed_scores(step)

  def _transposed_scores(self, step: _Step):
    """S^T - m for each 128-key chunk c into columns [128 c, 128 c + qn) of a score slot (so
    no chunk crosses a PSUM bank): k_t's chunk as the stationary operand and q_t as the
    moving one, then the rank-1 (-1) x m row (and, on the causal diagonal, the transposed
    mask) accumulated into it. Keys on partitions make exp's result P^T, the P @ V
    matmuls' stationary operand, with no transposes of P and no copies out of PSUM."""
    k, b, pmax = self.kernel, step.block, nl.tile_size.pmax
    step.scores = k.score_slots.next()
    parts = [step.scores[0:cn, c * pmax:c * pmax + b.qn] for c, (_, cn) in enumerate(step.chunks)]
    for part, (c0, cn) in zip(parts, step.chunks):
      nisa.nc_matmul(dst=part, stationary=k.k_t[:, step.k0 + c0:step.k0 + c0 + cn], moving=b.q_t)
    for part, (c0, cn) in zip(parts, step.chunks):
      nisa.nc_matmul(dst=part, stationary=k.minus_ones[0:1, 0:cn], moving=b.shift_row)
      if k.causal and step.k0 + c0 == b.q0:
        nisa.nc_matmul(dst=part, stationary=k.identity[0:cn, 0:cn],
                       moving=transposed_causal_mask(k.masks, cn))

  def _shift_row(self, b: _QueryBlock):
    """The block's max as a row: one TensorE transpose, ScalarE's copy out of PSUM."""
    flipped = self.kernel.flipped_slots.next()[0:1, 0:b.qn]
    nisa.nc_transpose(dst=flipped, data=b.max_col)
    b.shift_row = nl.ndarray((1, b.qn), dtype=b.max_col.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b.shift_row, src=flipped, engine=nisa.engine.scalar)

  def _first_op(self, step: _Step):
    k, b, pmax = self.kernel, step.block, nl.tile_size.pmax
    if not step.second_pass:
      nisa.tensor_reduce(dst=b.row_max[:, step.span:step.span + 1], op=nl.max, data=step.scores,
                         axis=1)
      if step.last:
        b.max_col = b.row_max
        if len(b.spans) > 1:
          b.max_col = nl.ndarray((b.qn, 1), dtype=b.row_max.dtype, buffer=nl.sbuf)
          nisa.tensor_reduce(dst=b.max_col, op=nl.max, data=b.row_max, axis=1)
      return
    # exp(scale (s - m)) = P^T: one ScalarE instruction over the full chunks when they are
    # contiguous (128 queries), one per chunk otherwise.
    step.probs_t = nl.ndarray((pmax, len(step.chunks) * pmax), dtype=k.dtype, buffer=nl.sbuf)
    full = sum(cn == pmax for _, cn in step.chunks) if b.qn == pmax else 0
    if full:
      nisa.activation(dst=step.probs_t[:, 0:full * pmax], op=nl.exp,
                      data=step.scores[:, 0:full * pmax], scale=k.scale)
    for c in range(full, len(step.chunks)):
      cn, columns = step.chunks[c][1], slice(c * pmax, c * pmax + b.qn)
      nisa.activation(dst=step.probs_t[0:cn, columns], op=nl.exp,
                      data=step.scores[0:cn, columns], scale=k.scale)

  def _multiply(self, step: _Step) -> list:
    """The P @ V matmuls of a step; the block, when they complete its accumulation."""
    k, b, pmax = self.kernel, step.block, nl.tile_size.pmax
    if step.span == 0:
      b.acc = k.acc_slots.next()[0:b.qn, :]
    for c, (c0, cn) in enumerate(step.chunks):
      nisa.nc_matmul(dst=b.acc, stationary=step.probs_t[0:cn, c * pmax:c * pmax + b.qn],
                     moving=k.v_tiles[(step.k0 + c0) // pmax])
    return [b] if step.last else []


class _Attention:
  """The kernel's state per kv head, and the output of one query block."""

  def __init__(self, q, k, v, causal, with_lse):
    self.heads, self.seq, self.dim = q.shape
    self.kv_heads, self.dtype, self.causal = k.shape[0], q.dtype, causal
    self.scale = 1.0 / float(np.sqrt(self.dim))
    self.out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    self.lse = (nl.ndarray((self.heads, self.seq), dtype=nl.float32, buffer=nl.shared_hbm)
                if with_lse else None)
    self.identity = identity_tile()
    self.minus_ones = nl.ndarray((1, nl.tile_size.pmax), dtype=self.dtype, buffer=nl.sbuf)
    nisa.memset(dst=self.minus_ones, value=-1.0)
    self.masks = {}
    self.copies = CopyRotation(vector_share=1, period=2)
    # PSUM (8 banks of 2 KiB per partition), allocated once and rotated: 6 banks of scores,
    # one for the transposes of q, k and the row maxima, and one of accumulators.
    block = key_block(self.dtype)
    self.score_slots = Slots(nl.ndarray((nl.tile_size.pmax, SCORE_SLOTS, block), dtype=nl.float32,
                                        buffer=nl.psum))
    self.flipped_slots = Slots(nl.ndarray((nl.tile_size.pmax, FLIPPED_SLOTS,
                                           block // FLIPPED_SLOTS),
                                          dtype=self.dtype, buffer=nl.psum))
    self.acc_slots = Slots(nl.ndarray((nl.tile_size.pmax, ACC_SLOTS, self.dim + 1),
                                      dtype=nl.float32, buffer=nl.psum))

  def run(self, q, k, v):
    group = self.heads // self.kv_heads
    # This program's query blocks of every head: every num_programs-th one, so that with a
    # causal mask (later blocks see more keys) the two cores of kernel[nl.nc(2)] get equal work.
    mine = tiles(self.seq, nl.tile_size.pmax)[nl.program_id(0)::nl.num_programs(0)]
    if not mine:  # fewer query blocks than cores
      return
    for kv_head in range(self.kv_heads):
      self.k_t = transposed_rows(k, kv_head, self.flipped_slots, self.copies)
      blocks = []
      for head in range(kv_head * group, (kv_head + 1) * group):
        q_t = transposed_rows(q, head, self.flipped_slots, self.copies, row_tiles=mine)
        pmax = nl.tile_size.pmax
        blocks += [_QueryBlock(head, q_t[:, i * pmax:i * pmax + qn], q0, qn,
                               q0 + qn if self.causal else self.seq)
                   for i, (q0, qn) in enumerate(mine)]
      # v is first needed by pass 2: its loads queue behind those of q.
      self.v_tiles = ones_extended_rows(v, kv_head)
      # Pass 1 of query block w + 2 alternates with pass 2 of block w, so that VectorE's row
      # maxima overlap TensorE's pass-2 matmuls and ScalarE's exponentials, and each block's
      # maximum is ready a block ahead of its pass 2.
      def maxima(w):
        return ([_Step(blocks[w], s, False) for s in range(len(blocks[w].spans))]
                if w < len(blocks) else [])
      steps = maxima(0) + maxima(1)
      for w, block in enumerate(blocks):
        products = [_Step(block, s, True) for s in range(len(block.spans))]
        steps += [step for pair in itertools.zip_longest(maxima(w + 2), products)
                  for step in pair if step is not None]
      _Pipeline(self).run(steps)

  def finish(self, b: _QueryBlock):
    dim = self.dim
    inverse = nl.ndarray((b.qn, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=inverse, op=nl.reciprocal, data=b.acc[:, dim:dim + 1])
    result = nl.ndarray((b.qn, dim), dtype=self.dtype, buffer=nl.sbuf)
    # On ScalarE, after its reciprocal: VectorE's in-order stream would wait for it there.
    nisa.activation(dst=result, op=nl.copy, data=b.acc[:, 0:dim], scale=inverse)
    nisa.dma_copy(dst=self.out[b.head, b.q0:b.q0 + b.qn, :], src=result)
    if self.lse is not None:  # log(sum) + scale * m, m the shift exp was given
      row_lse = nl.ndarray((b.qn, 1), dtype=nl.float32, buffer=nl.sbuf)
      nisa.activation(dst=row_lse, op=nl.log, data=b.acc[:, dim:dim + 1])
      nisa.activation(dst=row_lse, op=nl.copy, data=b.max_col, scale=self.scale, bias=row_lse)
      nisa.dma_copy(dst=self.lse[b.head, b.q0:b.q0 + b.qn], src=row_lse)


@nki.jit
def flash_attention_kernel(q, k, v, causal=False, with_lse=False):
  """with_lse: also return logsumexp(q k^T * scale) [H, S] in fp32 (what the backward needs)."""
  attention = _Attention(q, k, v, causal, with_lse)
  attention.run(q, k, v)
  return (attention.out, attention.lse) if with_lse else attention.out


# Both physical cores of an LNC=2 device, each on every other query block (one core elsewhere).
flash_attention_kernel = flash_attention_kernel[nl.nc(2)]
