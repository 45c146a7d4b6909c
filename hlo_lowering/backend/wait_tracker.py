"""WaitTracker: derives every instruction's semaphore waits from the memory it reads and writes
(the insert-semaphores stage feeds it each block's instructions in program order).

For a new instruction on stream S, each other stream T contributes the latest earlier
instruction of T that conflicts with it (read-after-write, write-after-read or write-after-write
on overlapping tile regions, or on the same HBM tensor); the wait is (T, that instruction's
1-based position in T). Order within S is implicit. Waits already implied are dropped: by an
earlier wait of S (streams run in order), or by what a waited-for instruction itself waited on
(it could not start before its own waits were met).

Accesses are indexed by region so each new instruction looks only at the accesses that can
overlap it: HBM by tensor, tiles by (memory, 32-partition quadrant, 2 KiB byte chunk). Inside an
index bucket, an access is forgotten once a later access of the same stream covers it and
conflicts with at least as much (a write covers reads and writes; a read covers reads), which keeps
the buckets short when compilers reuse buffers.
"""

from hlo_lowering.program.enums import NUM_STREAMS

_QUADRANT = 32
_CHUNK_BYTES = 2048


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


def _bucket_keys(region):
  if region[0] == "hbm":
    return [region]
  _, memory, p0, p1, b0, b1 = region
  return [(memory, q, c)
          for q in range(p0 // _QUADRANT, (p1 - 1) // _QUADRANT + 1)
          for c in range(b0 // _CHUNK_BYTES, (b1 - 1) // _CHUNK_BYTES + 1)]


class WaitTracker:
  """Feed instructions in program order with `add`; it returns each one's waits."""

  def __init__(self):
    self._length = [0] * NUM_STREAMS
    self._buckets = {}
    # known[s][i]: for instruction i of stream s, the completed count of every stream that is
    # guaranteed once it has started.
    self._known = [[] for _ in range(NUM_STREAMS)]

  def add(self, stream: int, reads, writes) -> list:
    position = self._length[stream] + 1
    latest = {}
    for is_write, regions in ((False, reads), (True, writes)):
      for region in regions:
        for key in _bucket_keys(region):
          for access in self._buckets.get(key, ()):
            if (access.stream != stream and (is_write or access.is_write)
                and access.position > latest.get(access.stream, 0)
                and _overlaps(access.region, region)):
              latest[access.stream] = access.position
    waits = self._minimal_waits(stream, latest)
    for is_write, regions in ((False, reads), (True, writes)):
      for region in regions:
        self._record(_Access(stream, position, is_write, region))
    self._length[stream] = position
    return waits

  def _minimal_waits(self, stream, latest) -> list:
    known = list(self._known[stream][-1]) if self._known[stream] else [0] * NUM_STREAMS
    candidates = {s: c for s, c in latest.items() if c > known[s]}
    implied = [0] * NUM_STREAMS
    for s, c in candidates.items():
      for t, k in enumerate(self._known[s][c - 1]):
        if k > implied[t]:
          implied[t] = k
    waits = sorted((s, c) for s, c in candidates.items() if c > implied[s])
    for s, c in candidates.items():
      known[s] = max(known[s], c)
    for t in range(NUM_STREAMS):
      known[t] = max(known[t], implied[t])
    self._known[stream].append(known)
    return waits

  def _record(self, access):
    for key in _bucket_keys(access.region):
      bucket = self._buckets.setdefault(key, [])
      bucket[:] = [old for old in bucket
                   if not (old.stream == access.stream
                           and (access.is_write or not old.is_write)
                           and _covers(access.region, old.region))]
      bucket.append(access)
