"""Flash attention backward, and `flash_attention`: the forward and backward kernels as one
differentiable function (jax.custom_vjp).

The backward recomputes P = exp(q k^T * scale - lse) from the forward's logsumexp
(FlashAttention-2's order: key groups of 512 outside, so dK and dV of a group accumulate over
every query block and every q head of its group in open PSUM groups, while dQ accumulates in
fp32 SBUF across key groups):

    dV += P^T dO        dP = dO V^T        dS = P * (dP - rowsum(dO * O))
    dK += dS^T Q * scale                   dQ += dS K * scale

Per 128 queries x 512 keys: TensorE computes the scores and dP (one matmul each), ScalarE
P = exp(...) and dP - delta (its per-partition bias), VectorE dS = P * (dP - delta), TensorE
the dV and dK matmuls (P and dS are already [queries, keys]: no transpose), four transposes
of dS into one PSUM bank, one copy of it to SBUF and the dQ matmuls. The steps are
software-pipelined (the scores of step t + 1 before the matmuls of step t). Every operand
TensorE needs with the contraction on partitions is made once per head; the causal form skips
query blocks wholly before a key group, stops each at its last query and masks the diagonal
128 keys as the forward does. Launched over both physical cores (kernel[nl.nc(2)]): each core
makes every step of its key groups (first and last paired: balanced under the causal mask):
dK, dV of its groups, and its groups' share of every dQ; the two shares of each dQ meet in HBM
across a core barrier (bit-identical to one program, which keeps the same two shares).
"""

import functools

import jax
import numpy as np

from jax_trn import nki
import jax_trn.nki.isa as nisa
import jax_trn.nki.language as nl
from jax_trn.kernels.attention import (CopyRotation, Slots, flash_attention_kernel,
                                       masked_scores, reference, transposed_rows)
from jax_trn.kernels.tiles import identity_tile, tiles

KEY_GROUP = 512  # keys per step: one PSUM bank of fp32 scores


def _owner(group: int) -> int:
  """The program (physical core) of kernel[nl.nc(2)] that makes key group `group`: 0, 1, 1, 0,
  0, 1, 1, 0, ... Under the causal mask a group's work shrinks with its index, so pairing the
  first with the last evens the cores out; the owner's groups also give each dQ share."""
  return int(group % 4 in (1, 2))


def _row_tiles(tensor, head):
  """tensor[head] as 128-row SBUF tiles [rows, d]."""
  result = []
  for s0, sn in tiles(tensor.shape[1], nl.tile_size.pmax):
    rows = nl.ndarray((sn, tensor.shape[2]), dtype=tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=tensor[head, s0:s0 + sn, :])
    result.append(rows)
  return result


def _per_query_columns(seq):
  """A [128, query blocks] fp32 tile, zeroed so that a partial last block's column is whole."""
  columns = nl.ndarray((nl.tile_size.pmax, len(tiles(seq, nl.tile_size.pmax))), dtype=nl.float32,
                       buffer=nl.sbuf)
  nisa.memset(dst=columns, value=0.0)
  return columns


class _Head:
  """One q head's operands: q and dO as rows and transposed, -lse and -rowsum(dO * O) as one
  column per query block (and -rowsum(dO * O) as a row in the matmul dtype), and the fp32 dQ
  accumulators."""

  def __init__(self, q, out, d_out, lse, head, flipped_slots, copies, owners, deltas):
    """`deltas`: None, or the HBM tensor through which the two cores share rowsum(dO * O):
    each makes it for every other query block (the rest arrives after a core barrier,
    `finish`)."""
    seq, dim = q.shape[1], q.shape[2]
    self.head, self.owners, self.deltas = head, owners, deltas
    self.blocks = blocks = tiles(seq, nl.tile_size.pmax)
    self.q_rows, self.d_out_rows = _row_tiles(q, head), _row_tiles(d_out, head)
    self.q_t = transposed_rows(q, head, flipped_slots, copies, loaded=self.q_rows)
    self.d_out_t = transposed_rows(d_out, head, flipped_slots, copies, loaded=self.d_out_rows)
    self.neg_lse, self.neg_delta = _per_query_columns(seq), _per_query_columns(seq)
    me, programs = nl.program_id(0), nl.num_programs(0)
    for i, (s0, sn) in enumerate(blocks):
      nisa.dma_copy(dst=self.neg_lse[0:sn, i:i + 1], src=lse[head, s0:s0 + sn])
      if deltas is not None and i % programs != me:
        continue
      o_rows = nl.ndarray((sn, dim), dtype=out.dtype, buffer=nl.sbuf)
      nisa.dma_copy(dst=o_rows, src=out[head, s0:s0 + sn, :])
      products = nl.ndarray((sn, dim), dtype=nl.float32, buffer=nl.sbuf)
      nisa.tensor_tensor(dst=products, data1=self.d_out_rows[i], data2=o_rows, op=nl.multiply)
      nisa.tensor_reduce(dst=self.neg_delta[0:sn, i:i + 1], op=nl.add, data=products, axis=1)
      if deltas is not None:
        nisa.dma_copy(dst=deltas[head, s0:s0 + sn], src=self.neg_delta[0:sn, i:i + 1])

  def finish(self, q, row_slots):
    """The other core's rowsum(dO * O) (after the barrier), then −lse and −delta negated and
    −delta as a row (transposed through `row_slots`, PSUM slots in q's dtype)."""
    seq = q.shape[1]
    me, programs = nl.program_id(0), nl.num_programs(0)
    for i, (s0, sn) in enumerate(self.blocks if self.deltas is not None else ()):
      if i % programs != me:
        nisa.dma_copy(dst=self.neg_delta[0:sn, i:i + 1], src=self.deltas[self.head, s0:s0 + sn])
    blocks = self.blocks
    for columns in (self.neg_lse, self.neg_delta):  # negated once for every block
      nisa.activation(dst=columns, op=nl.copy, data=columns, scale=-1.0)
    # -delta as one row [1, S] in the matmul dtype: a rank-1 matmul (-delta x ones) into dP's
    # PSUM group then gives dP - delta, with no ScalarE or VectorE pass over the block.
    # Transposed in the matmul dtype (the row is rounded to it anyway): a bf16 transpose takes a
    # quarter of an fp32 one's TensorE time.
    columns = self.neg_delta
    if q.dtype != self.neg_delta.dtype:
      columns = nl.ndarray(self.neg_delta.shape, dtype=q.dtype, buffer=nl.sbuf)
      nisa.tensor_copy(dst=columns, src=self.neg_delta)
    self.neg_delta_row = nl.ndarray((1, seq), dtype=q.dtype, buffer=nl.sbuf)
    for r0, rn in tiles(seq, KEY_GROUP):
      row = row_slots.next()[0:1, 0:rn]
      for i, (s0, sn) in enumerate(blocks):
        if r0 <= s0 < r0 + rn:
          nisa.nc_transpose(dst=row[:, s0 - r0:s0 - r0 + sn], data=columns[0:sn, i:i + 1])
      nisa.tensor_copy(dst=self.neg_delta_row[:, r0:r0 + rn], src=row)
    # fp32 dQ of each query block summed over each core's key groups (`owners`: the cores whose
    # groups this program makes), added once at the end.
    dim = q.shape[2]
    self.dq_acc = {owner: [nl.ndarray((sn, dim), dtype=nl.float32, buffer=nl.sbuf)
                           for _, sn in blocks] for owner in self.owners}


class _Step:
  """One (q head, 128-query block) against one key group: [q0, q0 + qn) x [k0, k0 + kn). It
  adds to the group's dK and dV and to the block's dQ share of the group's owner."""

  def __init__(self, side: _Head, block: int, q0: int, qn: int, k0: int, kn: int, first: bool):
    self.side, self.block, self.q0, self.qn, self.k0, self.kn = side, block, q0, qn, k0, kn
    self.owner = _owner(k0 // KEY_GROUP)
    self.first = first  # the first key group of its owner this query block sees: it writes


class _Backward:
  def __init__(self, q, causal):
    self.dim, self.dtype, self.causal = q.shape[2], q.dtype, causal
    self.scale = 1.0 / float(np.sqrt(self.dim))
    self.identity = identity_tile()
    self.masks = {}
    self.copies = CopyRotation(vector_share=0, period=1)  # VectorE has dS and the dQ sums
    pmax = nl.tile_size.pmax
    # PSUM (8 banks of 2 KiB per partition): two slots each of scores and dP, dS^T (two
    # [128, 512] slots in one bank in bf16), dK and dV of a key group, three dQ slots.
    self.score_slots = Slots(nl.ndarray((pmax, 2, KEY_GROUP), dtype=nl.float32, buffer=nl.psum))
    self.d_probs_slots = Slots(nl.ndarray((pmax, 2, KEY_GROUP), dtype=nl.float32, buffer=nl.psum))
    flipped = max(1, 2048 // (KEY_GROUP * q.itemsize))
    self.flipped_slots = Slots(nl.ndarray((pmax, flipped, KEY_GROUP), dtype=q.dtype,
                                          buffer=nl.psum))
    self.ones_row = nl.ndarray((1, KEY_GROUP), dtype=q.dtype, buffer=nl.sbuf)
    nisa.memset(dst=self.ones_row, value=1.0)
    self.dq_slots = Slots(nl.ndarray((pmax, 3, self.dim), dtype=nl.float32, buffer=nl.psum))

  def scores(self, step: _Step):
    """P and dS of one step (TensorE, ScalarE, VectorE)."""
    side, qn, kn, k0 = step.side, step.qn, step.kn, step.k0
    q_t = side.q_t[:, step.q0:step.q0 + qn]
    scores = self.score_slots.next()[0:qn, 0:kn]
    masked_scores(scores, q_t, self.k_t, k0, step.q0, self.causal, self.identity, self.masks)
    d_probs = self.d_probs_slots.next()[0:qn, 0:kn]
    nisa.nc_matmul(dst=d_probs, stationary=side.d_out_t[:, step.q0:step.q0 + qn],
                   moving=self.v_t[:, k0:k0 + kn])
    nisa.nc_matmul(dst=d_probs, stationary=side.neg_delta_row[:, step.q0:step.q0 + qn],
                   moving=self.ones_row[:, 0:kn])
    i = step.block
    step.probs = nl.ndarray((qn, kn), dtype=self.dtype, buffer=nl.sbuf)
    nisa.activation(dst=step.probs, op=nl.exp, data=scores, scale=self.scale,
                    bias=side.neg_lse[0:qn, i:i + 1])
    step.d_scores = nl.ndarray((qn, kn), dtype=self.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=step.d_scores, data1=d_probs, data2=step.probs, op=nl.multiply)

  def key_gradients(self, step: _Step):
    """dV and dK contributions, and dS^T in SBUF (for dQ)."""
    side, qn = step.side, step.qn
    chunks = tiles(step.kn, nl.tile_size.pmax)
    for c, (c0, cn) in enumerate(chunks):
      chunk = (step.k0 - self.g0 + c0) // nl.tile_size.pmax
      nisa.nc_matmul(dst=self.dv_acc[0:cn, chunk, :], stationary=step.probs[:, c0:c0 + cn],
                     moving=side.d_out_rows[step.block])
      nisa.nc_matmul(dst=self.dk_acc[0:cn, chunk, :], stationary=step.d_scores[:, c0:c0 + cn],
                     moving=side.q_rows[step.block])
    flipped = self.flipped_slots.next()
    for c, (c0, cn) in enumerate(chunks):
      nisa.nc_transpose(dst=flipped[0:cn, c * qn:(c + 1) * qn], data=step.d_scores[:, c0:c0 + cn])
    step.d_scores_t = nl.ndarray((min(step.kn, nl.tile_size.pmax), len(chunks) * qn),
                                 dtype=self.dtype, buffer=nl.sbuf)
    full = len(chunks) if chunks[-1][1] == chunks[0][1] else len(chunks) - 1
    self.copies.copy(step.d_scores_t[:, 0:full * qn], flipped[0:chunks[0][1], 0:full * qn])
    if full < len(chunks):
      rest = chunks[-1][1]
      self.copies.copy(step.d_scores_t[0:rest, full * qn:], flipped[0:rest, full * qn:len(chunks) * qn])
    step.chunks = chunks

  def query_gradient(self, step: _Step):
    """dS @ K into PSUM, added to the block's fp32 dQ share of the step's owner."""
    dq_part = self.dq_slots.next()[0:step.qn, :]
    for c, (c0, cn) in enumerate(step.chunks):
      nisa.nc_matmul(dst=dq_part, stationary=step.d_scores_t[0:cn, c * step.qn:(c + 1) * step.qn],
                     moving=self.k_rows[(step.k0 + c0) // nl.tile_size.pmax])
    acc = step.side.dq_acc[step.owner][step.block]
    if step.first:
      nisa.tensor_copy(dst=acc, src=dq_part)
    else:
      nisa.tensor_tensor(dst=acc, data1=acc, data2=dq_part, op=nl.add)

  def run_group(self, steps):
    """The steps of one key group, pipelined: at step t the scores and dS of step t + 1, the
    dV/dK matmuls and dS^T of step t and the dQ matmuls of step t - 1."""
    self.scores(steps[0])
    for t, step in enumerate(steps):
      if t + 1 < len(steps):
        self.scores(steps[t + 1])
      self.key_gradients(step)
      if t > 0:
        self.query_gradient(steps[t - 1])
    self.query_gradient(steps[-1])


@nki.jit
def flash_attention_backward_kernel(q, k, v, out, d_out, lse, causal=False):
  """dq, dk, dv of flash attention given its output `out`, logsumexp `lse` and the output's
  cotangent `d_out`."""
  heads, seq, dim = q.shape
  kv_heads = k.shape[0]
  group = heads // kv_heads
  pmax = nl.tile_size.pmax
  dq = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
  dk = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
  dv = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
  bwd = _Backward(q, causal)
  blocks = tiles(seq, pmax)
  groups = tiles(seq, KEY_GROUP)
  # Each program of kernel[nl.nc(2)] (each physical core) makes every step of its key groups
  # (_owner: balanced under the causal mask): dK and dV of its groups, and its share of every
  # dQ (the sum over its groups). The two cores' shares meet in HBM across a core barrier, each
  # core adding the other's for every other query block. One program keeps the two shares too,
  # so each gradient sums in the same order however many programs run.
  me, programs = nl.program_id(0), nl.num_programs(0)
  owners = (0, 1) if programs == 1 else (me,)

  def has_share(owner, q0, qn):
    """Whether the key groups of `owner` reach query block [q0, q0 + qn): its first group (0
    or 1) does."""
    return owner < len(groups) and (not causal or owner * KEY_GROUP < q0 + qn)

  dq_shares = (nl.ndarray(q.shape, dtype=nl.float32, buffer=nl.shared_hbm) if programs > 1
               else None)
  deltas = (nl.ndarray(q.shape[0:2], dtype=nl.float32, buffer=nl.shared_hbm) if programs > 1
            else None)
  heads_done = []
  for kv_head in range(kv_heads):
    bwd.k_rows = _row_tiles(k, kv_head)
    bwd.k_t = transposed_rows(k, kv_head, bwd.flipped_slots, bwd.copies, loaded=bwd.k_rows)
    bwd.v_t = transposed_rows(v, kv_head, bwd.flipped_slots, bwd.copies)
    sides = [_Head(q, out, d_out, lse, head, bwd.flipped_slots, bwd.copies, owners, deltas)
             for head in range(kv_head * group, (kv_head + 1) * group)]
    if deltas is not None:
      nisa.core_barrier(deltas, (0, 1))
    for side in sides:
      side.finish(q, bwd.flipped_slots)
    for g, (g0, gn) in enumerate(groups):
      if _owner(g) not in owners:
        continue
      bwd.g0 = g0
      bwd.dk_acc = nl.ndarray((pmax, KEY_GROUP // pmax, dim), dtype=nl.float32, buffer=nl.psum)
      bwd.dv_acc = nl.ndarray((pmax, KEY_GROUP // pmax, dim), dtype=nl.float32, buffer=nl.psum)
      steps = []
      for side in sides:
        for i, (q0, qn) in enumerate(blocks):
          # Causal: keys after the block's last query contribute nothing.
          kn = min(gn, q0 + qn - g0) if causal else gn
          if kn > 0:
            steps.append(_Step(side, i, q0, qn, g0, kn, first=g < 2))
      if steps:
        bwd.run_group(steps)
      for c, (c0, cn) in enumerate(tiles(gn, pmax)):
        dk_tile = nl.ndarray((cn, dim), dtype=k.dtype, buffer=nl.sbuf)
        nisa.activation(dst=dk_tile, op=nl.copy, data=bwd.dk_acc[0:cn, c, :], scale=bwd.scale)
        nisa.dma_copy(dst=dk[kv_head, g0 + c0:g0 + c0 + cn, :], src=dk_tile)
        dv_tile = nl.ndarray((cn, dim), dtype=v.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dv_tile, src=bwd.dv_acc[0:cn, c, :])
        nisa.dma_copy(dst=dv[kv_head, g0 + c0:g0 + c0 + cn, :], src=dv_tile)
    if programs > 1:  # this core's dQ shares of the other core's query blocks, for it to add
      for side in sides:
        for i, (q0, qn) in enumerate(blocks):
          if i % programs != me and has_share(me, q0, qn):
            nisa.dma_copy(dst=dq_shares[side.head, q0:q0 + qn, :], src=side.dq_acc[me][i])
    heads_done.extend(sides)
  if programs > 1:
    nisa.core_barrier(dq_shares, (0, 1))
  for side in heads_done:
    for i, (q0, qn) in list(enumerate(blocks))[me::programs]:
      shares = [side.dq_acc[owner][i] for owner in owners if has_share(owner, q0, qn)]
      if programs > 1 and has_share(1 - me, q0, qn):
        theirs = nl.ndarray((qn, dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=theirs, src=dq_shares[side.head, q0:q0 + qn, :])
        shares.append(theirs)
      total = shares[0]
      if len(shares) == 2:  # fp32 addition commutes: the same bits in either order
        total = nl.ndarray((qn, dim), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=shares[0], data2=shares[1], op=nl.add)
      result = nl.ndarray((qn, dim), dtype=q.dtype, buffer=nl.sbuf)
      nisa.activation(dst=result, op=nl.copy, data=total, scale=bwd.scale)
      nisa.dma_copy(dst=dq[side.head, q0:q0 + qn, :], src=result)
  return dq, dk, dv


flash_attention_backward_kernel = flash_attention_backward_kernel[nl.nc(2)]


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
