"""WaitTracker: derives every instruction's semaphore waits from the memory it reads and writes
(the insert-semaphores stage feeds it each block's instructions in program order).

For a new instruction on stream S, each other stream T contributes the latest earlier
instruction of T that conflicts with it (read-after-write, write-after-read or write-after-write
on overlapping tile regions, or on the same HBM tensor); the wait is (T, that instruction's
1-based position in T). Order within S is implicit. Waits already implied are dropped: by an
earlier wait of S (streams run in order), or by what a waited-for instruction itself waited on
(it could not start before its own waits were met).

Accesses are indexed by region so each new instruction looks only at the accesses that can
overlap it: HBM by tensor, tiles by (memory, 32-partition quadrant, 2 KiB byte chunk), and inside
a chunk the narrow accesses (within one 64-byte slice) by slice. An access is forgotten once a
later access covers it and conflicts with at least as much, which keeps the buckets short (independent of program length) when buffers are reused:
- a read covers the same stream's reads;
- a write covers every access, of any stream. Of its own stream: stream order. Of another
  stream T: the write waited (directly or through a chain) for T's access, and the known counts
  are transitively closed (if an instruction's known count of S is c, its known counts include
  those of S's instruction c), so any later instruction that would conflict with T's access
  conflicts with the write, and its wait on the write (or a stronger one it already has) implies
  the wait on T's access: forgetting it changes no wait.
"""

from hlo_lowering.program.enums import NUM_STREAMS

_QUADRANT = 32
_CHUNK_BYTES = 2048
# A tile access whose bytes lie in one such slice of a chunk is "narrow" (a column written or read
# one at a time): indexed by slice, so a chunk full of them is not scanned whole per access.
_SLICE_BYTES = 64


class _Access:
  __slots__ = ("stream", "position", "is_write", "region")

  def __init__(self, stream, position, is_write, region):
    self.stream = stream
    self.position = position
    self.is_write = is_write
    self.region = region


def _overlaps(a, b) -> bool:
  if a[0] == "hbm":
    return a == b
  return a[1] == b[1] and a[2] < b[3] and b[2] < a[3] and a[4] < b[5] and b[4] < a[5]


def _covers(outer, inner) -> bool:
  if outer[0] == "hbm":
    return outer == inner
  return (outer[1] == inner[1] and outer[2] <= inner[2] and inner[3] <= outer[3]
          and outer[4] <= inner[4] and inner[5] <= outer[5])


def bucket_keys(region):
  """The index keys of the buckets a region lies in (HBM: its tensor; tiles: memory, quadrant,
  chunk)."""
  if region[0] == "hbm":
    return [region]
  _, memory, p0, p1, b0, b1 = region
  return [(memory, q, c)
          for q in range(p0 // _QUADRANT, (p1 - 1) // _QUADRANT + 1)
          for c in range(b0 // _CHUNK_BYTES, (b1 - 1) // _CHUNK_BYTES + 1)]


def _narrow_slice(region):
  """The slice index of a narrow tile region, or None."""
  if region[0] == "hbm" or region[4] // _SLICE_BYTES != (region[5] - 1) // _SLICE_BYTES:
    return None
  return region[4] // _SLICE_BYTES


def _slices(region, key):
  """The slice indices of chunk `key` that tile `region` touches."""
  chunk = key[2] * _CHUNK_BYTES
  lo = max(region[4], chunk) // _SLICE_BYTES
  hi = (min(region[5], chunk + _CHUNK_BYTES) - 1) // _SLICE_BYTES
  return range(lo, hi + 1)


class _Bucket:
  """The accesses of one index key: `wide` in a list, narrow ones by slice."""
  __slots__ = ("wide", "narrow")

  def __init__(self):
    self.wide = []
    self.narrow = {}

  def lists_touching(self, region, key):
    """The lists holding every access of this bucket that can overlap `region`."""
    lists = [self.wide]
    if self.narrow:
      slice_ = _narrow_slice(region)
      if slice_ is not None:
        if slice_ in self.narrow:
          lists.append(self.narrow[slice_])
      else:
        span = _slices(region, key)
        if len(span) < len(self.narrow):
          lists.extend(self.narrow[i] for i in span if i in self.narrow)
        else:
          lists.extend(l for i, l in self.narrow.items() if i in span)
    return lists


class WaitTracker:
  """Feed instructions in program order with `add`; it returns each one's waits."""

  def __init__(self):
    self._length = [0] * NUM_STREAMS
    self._buckets = {}
    # known[s][p]: for instruction p (1-based) of stream s, the completed count of every stream
    # that is guaranteed once it has started; last_known[s]: that of s's latest instruction.
    self._known = [{} for _ in range(NUM_STREAMS)]
    self._last_known = [[0] * NUM_STREAMS for _ in range(NUM_STREAMS)]

  def length(self, stream: int) -> int:
    """Instructions of `stream` so far."""
    return self._length[stream]

  def known(self, stream: int) -> list:
    """Completed counts of every stream guaranteed once `stream`'s latest instruction started."""
    return list(self._last_known[stream])

  def skip(self, counts: dict) -> None:
    """Streams advance by counts[stream] instructions that are not fed (the middle iterations
    of a loop). What the tracker knows stays true: it only under-estimates what they imply."""
    for stream, count in counts.items():
      self._length[stream] += count

  def add(self, stream: int, reads, writes) -> list:
    position = self._length[stream] + 1
    latest = self.latest(stream, reads, writes)
    waits = self._minimal_waits(stream, position, latest)
    for is_write, regions in ((False, reads), (True, writes)):
      for region in regions:
        self._record(_Access(stream, position, is_write, region))
    self._length[stream] = position
    return waits

  def latest(self, stream: int, reads, writes) -> dict:
    """{other stream: the position of its latest remembered access that conflicts}."""
    latest = {}
    for is_write, regions in ((False, reads), (True, writes)):
      for region in regions:
        for key in bucket_keys(region):
          bucket = self._buckets.get(key)
          if bucket is None:
            continue
          for accesses in bucket.lists_touching(region, key):
            for access in accesses:
              if (access.stream != stream and (is_write or access.is_write)
                  and access.position > latest.get(access.stream, 0)
                  and _overlaps(access.region, region)):
                latest[access.stream] = access.position
    return latest

  def _minimal_waits(self, stream, position, latest) -> list:
    known = list(self._last_known[stream])
    candidates = {s: c for s, c in latest.items() if c > known[s]}
    implied = [0] * NUM_STREAMS
    for s, c in candidates.items():
      for t, k in enumerate(self._known[s][c]):
        if k > implied[t]:
          implied[t] = k
    waits = sorted((s, c) for s, c in candidates.items() if c > implied[s])
    for s, c in candidates.items():
      known[s] = max(known[s], c)
    for t in range(NUM_STREAMS):
      known[t] = max(known[t], implied[t])
    self._known[stream][position] = known
    self._last_known[stream] = known
    return waits

  def _record(self, access):
    region = access.region
    slice_ = _narrow_slice(region)
    for key in bucket_keys(region):
      bucket = self._buckets.get(key)
      if bucket is None:
        bucket = self._buckets[key] = _Bucket()
      for accesses in bucket.lists_touching(region, key):
        accesses[:] = [old for old in accesses
                       if not ((access.is_write
                                or (old.stream == access.stream and not old.is_write))
                               and _covers(region, old.region))]
      if slice_ is None:
        bucket.wide.append(access)
      else:
        bucket.narrow.setdefault(slice_, []).append(access)
