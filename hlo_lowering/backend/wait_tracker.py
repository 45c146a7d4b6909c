"""WaitTracker: derives every instruction's semaphore waits from the memory it reads and writes
(the insert-semaphores stage feeds it each block's instructions in program order).

For a new instruction on stream S, each other stream T contributes the latest earlier instruction of
T that conflicts with it (read-after-write, write-after-read or write-after-write on overlapping
tile regions of one core, or on the same HBM tensor unless the two are different shares of one op
split between the physical cores: `instructions.disjoint_parts`); the wait is (T, that instruction's
1-based position in T). Order within S is implicit. Waits already implied are dropped: by an earlier
wait of S (streams run in order), or by what a waited-for instruction itself waited on (it could not
start before its own waits were met).

Accesses are indexed by region so each new instruction looks only at the accesses that can overlap
it: HBM by tensor, tiles by (memory, 2 KiB byte chunk) (not by partition: most tiles span all 128,
and a quadrant index scanned each of them four times), and inside a chunk the narrow accesses
(within one 64-byte slice) by slice; reads and writes apart, so that a read scans only the writes
for its conflicts and only the reads for what it covers. An access is forgotten once a later
access covers it and conflicts with at least as much, which keeps the buckets short (independent
of program length) when buffers are reused:
- a read covers the same stream's reads;
- a write covers every access, of any stream (a write of a split's share: only that share's). Of its
  own stream: stream order. Of another stream T: the write waited (directly or through a chain) for
  T's access, and the known counts are transitively closed (if an instruction's known count of S is
  c, its known counts include those of S's instruction c), so any later instruction that would
  conflict with T's access conflicts with the write, and its wait on the write (or a stronger one it
  already has) implies the wait on T's access: forgetting it changes no wait (nor does keeping it: a
  write keeps the covered accesses it does not overlap, which only an empty region could be).

`add` walks each bucket list once: it raises the instruction's latest conflicts from a list and then
forgets what the new access covers in it. That is the same as finding every conflict before
recording anything: what a region forgets was either of the instruction's own stream (never a
conflict) or overlapped and already counted by it.
"""

from hlo_lowering.program.instructions import disjoint_parts

_CHUNK_BYTES = 2048
# A tile access whose bytes lie in one such slice of a chunk is "narrow" (a column written or read
# one at a time): indexed by slice, so a chunk full of them is not scanned whole per access.
_SLICE_BYTES = 64


def bucket_keys(region):
  """The index keys of the buckets a region lies in (HBM: its tensor; tiles: memory, chunk)."""
  if region[0] == "hbm":
    return [region[:2]]
  _, memory, _, _, b0, b1 = region
  return [(memory, c) for c in range(b0 // _CHUNK_BYTES, (b1 - 1) // _CHUNK_BYTES + 1)]


def _narrow_slice(region):
  """The slice index of a narrow tile region, or None."""
  if region[0] == "hbm" or region[4] // _SLICE_BYTES != (region[5] - 1) // _SLICE_BYTES:
    return None
  return region[4] // _SLICE_BYTES


def _slices(region, key):
  """The slice indices of chunk `key` that tile `region` touches."""
  chunk = key[1] * _CHUNK_BYTES
  lo = max(region[4], chunk) // _SLICE_BYTES
  hi = (min(region[5], chunk + _CHUNK_BYTES) - 1) // _SLICE_BYTES
  return range(lo, hi + 1)


class _Bucket:
  """The reads, or the writes, of one index key: `wide` in a list, narrow ones by slice. An access
  is a tuple (stream, position, is_write, region)."""
  __slots__ = ("wide", "narrow")

  def __init__(self):
    self.wide = []
    self.narrow = {}

  def copy(self) -> "_Bucket":
    other = _Bucket()
    other.wide = list(self.wide)
    other.narrow = {i: list(accesses) for i, accesses in self.narrow.items()}
    return other

  def append(self, slice_, access) -> None:
    """Adds an access whose region's narrow slice is `slice_` (None: wide)."""
    if slice_ is None:
      self.wide.append(access)
    else:
      self.narrow.setdefault(slice_, []).append(access)

  def lists_touching(self, slice_, span):
    """The lists holding every access of this bucket that can overlap a region whose narrow
    slice is `slice_` (None: a wide region touching the slices `span` of this bucket's chunk)."""
    narrow = self.narrow
    if not narrow:
      return (self.wide,)
    if slice_ is not None:
      accesses = narrow.get(slice_)
      return (self.wide,) if accesses is None else (self.wide, accesses)
    if len(span) < len(narrow):
      return [self.wide] + [narrow[i] for i in span if i in narrow]
    return [self.wide] + [accesses for i, accesses in narrow.items() if i in span]


# The scans below run once per (access, bucket list) pair, the compiler's innermost loop: the
# overlap and cover tests are written out on the tuples. A bucket's accesses are all of its
# key's memory (tiles) or of its key's tensor (HBM), so only the bounds are compared.

def _raise_latest(accesses, stream, is_write, region, latest) -> None:
  """Raises latest[t] to the position of every access of another stream t in `accesses` that
  conflicts with an access of `region` (a write when `is_write`)."""
  if region[0] == "hbm":
    part = region[2]
    for s, position, was_write, r in accesses:
      if (s != stream and (is_write or was_write) and position > latest.get(s, 0)
          and not disjoint_parts(part, r[2])):
        latest[s] = position
    return
  _, _, p0, p1, b0, b1 = region
  for s, position, was_write, r in accesses:
    if (s != stream and (is_write or was_write) and position > latest.get(s, 0)
        and r[2] < p1 and p0 < r[3] and r[4] < b1 and b0 < r[5]):
      latest[s] = position


def _forget_covered(accesses, stream, is_write, region) -> None:
  """Drops from `accesses` those a new access of `region` by `stream` covers (module docstring):
  a write every covered access that it overlaps (so _raise_latest counted it first), a read the
  covered reads of its own stream."""
  if region[0] == "hbm":
    # A write of one share of a split (part) covers only that share's accesses: the others it
    # did not wait for, and what conflicts with them need not conflict with it.
    part = region[2]
    if is_write and part is None:
      accesses.clear()
    elif is_write:
      accesses[:] = [a for a in accesses if a[3][2] != part]
    else:
      accesses[:] = [a for a in accesses if a[0] != stream or a[2] or a[3][2] != part]
    return
  _, _, p0, p1, b0, b1 = region
  if is_write:
    accesses[:] = [a for a in accesses
                   if not (p0 <= a[3][2] and a[3][3] <= p1 and b0 <= a[3][4] and a[3][5] <= b1
                           and a[3][2] < a[3][3] and a[3][4] < a[3][5])]
  else:
    accesses[:] = [a for a in accesses
                   if a[0] != stream or a[2]
                   or not (p0 <= a[3][2] and a[3][3] <= p1 and b0 <= a[3][4] and a[3][5] <= b1)]


class _Trial:
  """What a rollback restores: the stream lengths and latest known counts when the trial began,
  each bucket the trial touched as it was then (None: it did not exist), and the (stream,
  position) of each instruction fed since."""
  __slots__ = ("length", "last_known", "buckets", "known")

  def __init__(self, length, last_known):
    self.length, self.last_known = length, last_known
    self.buckets = {}
    self.known = []


class WaitTracker:
  """Feed instructions in program order with `add`; it returns each one's waits."""

  def __init__(self, streams: int):
    """`streams`: how many stream ids the program uses (21 per physical core)."""
    self.streams = streams
    self._length = [0] * streams
    self._buckets = {}
    # region -> (its narrow slice or None, ((bucket key, slices of that key's chunk it touches),
    # ...)): tile regions recur (buffers are reused), so each is placed once.
    self._placements = {}
    # known[s][p]: for instruction p (1-based) of stream s, the completed count of every stream
    # that is guaranteed once it has started; last_known[s]: that of s's latest instruction.
    self._known = [{} for _ in range(streams)]
    self._last_known = [[0] * streams for _ in range(streams)]
    self._trial = None  # a _Trial while one runs (begin_trial)

  def begin_trial(self) -> None:
    """Starts a trial: what is fed from now on is undone by `rollback` or kept by `commit`. It
    costs what is fed during the trial (each bucket it touches is copied once), not what the
    tracker already holds. Trials do not nest."""
    assert self._trial is None, "a trial is already running"
    # The inner lists of _last_known are replaced, never changed in place: a shallow copy keeps
    # them.
    self._trial = _Trial(list(self._length), list(self._last_known))

  def commit(self) -> None:
    """Keeps what the running trial fed."""
    self._trial = None

  def rollback(self) -> None:
    """Undoes what the running trial fed: the tracker is as it was when the trial began."""
    trial, self._trial = self._trial, None
    self._length, self._last_known = trial.length, trial.last_known
    for key, bucket in trial.buckets.items():
      if bucket is None:
        del self._buckets[key]
      else:
        self._buckets[key] = bucket
    for stream, position in trial.known:
      del self._known[stream][position]

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
    latest = {}
    for region in reads:  # conflicts only with writes; covers only reads
      slice_, keys = self._placement(region)
      access = (stream, position, False, region)
      for key, span in keys:
        bucket = self._buckets.get((key, True))
        if bucket is not None:
          for accesses in bucket.lists_touching(slice_, span):
            _raise_latest(accesses, stream, False, region, latest)
        bucket = self._bucket((key, False))
        for accesses in bucket.lists_touching(slice_, span):
          _forget_covered(accesses, stream, False, region)
        bucket.append(slice_, access)
    for region in writes:
      slice_, keys = self._placement(region)
      access = (stream, position, True, region)
      for key, span in keys:
        for of_writes in (False, True):
          bucket = self._bucket((key, of_writes))
          for accesses in bucket.lists_touching(slice_, span):
            _raise_latest(accesses, stream, True, region, latest)
            _forget_covered(accesses, stream, True, region)
        bucket.append(slice_, access)
    waits = self._minimal_waits(stream, position, latest)
    self._length[stream] = position
    return waits

  def _bucket(self, key) -> _Bucket:
    """The bucket of `key` ((index key, of writes)), made if new; in a trial, a copy of it the
    first time the trial touches it."""
    bucket, trial = self._buckets.get(key), self._trial
    if trial is not None and key not in trial.buckets:
      trial.buckets[key] = bucket  # restored by a rollback; the trial changes a copy
      bucket = self._buckets[key] = _Bucket() if bucket is None else bucket.copy()
    elif bucket is None:
      bucket = self._buckets[key] = _Bucket()
    return bucket

  def latest(self, stream: int, reads, writes) -> dict:
    """{other stream: the position of its latest remembered access that conflicts}."""
    latest = {}
    for is_write, regions in ((False, reads), (True, writes)):
      for region in regions:
        slice_, keys = self._placement(region)
        for key, span in keys:
          for of_writes in (True, False) if is_write else (True,):
            bucket = self._buckets.get((key, of_writes))
            if bucket is not None:
              for accesses in bucket.lists_touching(slice_, span):
                _raise_latest(accesses, stream, is_write, region, latest)
    return latest

  def _placement(self, region):
    placement = self._placements.get(region)
    if placement is None:
      slice_ = _narrow_slice(region)
      wide_tile = region[0] != "hbm" and slice_ is None
      placement = self._placements[region] = (
          slice_, tuple((key, _slices(region, key) if wide_tile else None) for key in bucket_keys(region)))
    return placement

  def _minimal_waits(self, stream, position, latest) -> list:
    if self._trial is not None:
      self._trial.known.append((stream, position))
    known = self._last_known[stream]
    candidates = {s: c for s, c in latest.items() if c > known[s]}
    if not candidates:  # nothing new: it knows what its stream's previous instruction knew
      self._known[stream][position] = known
      return []
    implied = [0] * self.streams
    for s, c in candidates.items():
      implied = list(map(max, implied, self._known[s][c]))
    waits = sorted((s, c) for s, c in candidates.items() if c > implied[s])
    known = list(map(max, known, implied))
    for s, c in candidates.items():
      if c > known[s]:
        known[s] = c
    self._known[stream][position] = known
    self._last_known[stream] = known
    return waits
