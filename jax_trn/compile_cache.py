"""A persistent, cross-process cache of compiled NeuronCore programs (and their compile reports).

JAX's own persistent compilation cache is gated on platform names and does not serve "trn", so the
plugin keeps its own (the cache is the plugin's policy, not the compiler's: JAX keeps its cache in
JAX, not in XLA): `jax_trn.compilation.compile_for_pjrt` looks a program up here before it calls
the compiler.

Key: sha256 over (the compiler fingerprint, the module without its source locations
(`hlo_lowering.module_identity`: the same function jitted from two scripts, or after an edit above
it, is one entry), fmt, the compile options the compiler reads, target, the target description). The compile options enter as the parsed options the compiler
reads (`hlo_lowering.compiler.CompileOptions` after `check_options`; partitioned programs are
refused before any lookup), not as the serialized CompileOptionsProto: its DebugOptions hold
protobuf maps that serialize in hash order, so the same options give different bytes in different
processes. A compiler change that starts reading another option adds it to CompileOptions, and so
to the key. The compiler fingerprint is the program format version plus a hash of every source
file of the `hlo_lowering` package and of the runtime library whose loader checks programs
(`libtrn_runtime.so`), computed once per process, so any compiler change (a program format change
included) and any loader change misses every older entry (older entries age out through
eviction): an entry is served only to the loader that accepted the program it was compiled for.

Aliases: resolving the key means parsing the module (to strip its locations), which costs more
than the rest of a hit. So a request is first looked up by its exact bytes: `<exact key>.trna`
is an entry of the same layout under the key of the exact request bytes (the same key parts, the
code as sent), holding the program and report exactly as they were served to those bytes (compiled,
or re-attached to their locations); it is written with every compile and every hit through the
key, so a script run again is served without parsing its module.

Storage: `TRN_CACHE_DIR` (default `~/.cache/jax-trn`; empty or `0` disables the cache), one file
`<key>.trnc` per entry, written to a temporary file in the same directory and renamed into place
(`os.replace`, atomic on POSIX), so concurrent processes and threads never see a partial entry; two
writers of one key both write a complete, identical entry and the last rename wins. An entry holds
the key it was stored under, then the program bytes and the compile report with the source
locations of the request it was compiled from (JSON), behind a magic header and a sha256 checksum
of all three (a hit from a request with other locations gets them re-attached:
jax_trn/source_locations.py); an entry that is truncated, corrupted, of another layout,
stored under another key (a file renamed or copied onto this name: served, it would run another
program) is ignored (the program is recompiled and the entry rewritten); aliases are
checked the same way.

Size cap: `TRN_CACHE_MAX_BYTES` (default 1 GiB). A hit refreshes the entry's (and its alias')
mtime; after each store, the oldest entries and aliases by mtime are deleted until the directory is under the cap (an entry
larger than the cap is not stored). Every file-system error is logged and treated as a miss: the
cache never makes a compile fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import struct
import tempfile
import threading
import time

import hlo_lowering
from hlo_lowering.program import writer
from hlo_lowering.report import CompileReport, LoweredOp
from jax_trn import _native

logger = logging.getLogger(__name__)

DEFAULT_DIR = os.path.join("~", ".cache", "jax-trn")
DEFAULT_MAX_BYTES = 1 << 30
SUFFIX = ".trnc"
ALIAS_SUFFIX = ".trna"
_MAGIC = b"TRNCACHE3\n"
# magic, the entry's key (sha256 digest), program length, metadata (report, locations) length,
# sha256(key + program + metadata)
_HEADER = struct.Struct(f"<{len(_MAGIC)}s32sQQ32s")
_STALE_TMP_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Entry:
  program: bytes
  report: CompileReport
  # The compiled request's op locations (hlo_lowering.module_identity.ModuleIdentity.locations).
  locations: tuple[tuple[str, str], ...]


_fingerprint: str | None = None
_fingerprint_lock = threading.Lock()


def cache_dir() -> str | None:
  """The cache directory from TRN_CACHE_DIR, or None when the cache is disabled."""
  value = os.environ.get("TRN_CACHE_DIR")
  if value is None:
    value = DEFAULT_DIR
  value = value.strip()
  if value in ("", "0"):
    return None
  return os.path.abspath(os.path.expanduser(value))


def max_bytes() -> int:
  value = os.environ.get("TRN_CACHE_MAX_BYTES", "").strip()
  if not value:
    return DEFAULT_MAX_BYTES
  try:
    return max(int(value), 0)
  except ValueError:
    logger.warning("TRN_CACHE_MAX_BYTES=%r is not an integer; using %d", value, DEFAULT_MAX_BYTES)
    return DEFAULT_MAX_BYTES


def compiler_fingerprint() -> str:
  """Program format version + sha256 of the hlo_lowering package's source files and of the
  runtime library (once per process)."""
  global _fingerprint
  with _fingerprint_lock:
    if _fingerprint is None:
      root = os.path.dirname(os.path.abspath(hlo_lowering.__file__))
      digest = hashlib.sha256(f"program-format-{writer.VERSION}\n".encode())
      paths = []
      for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        paths.extend(os.path.join(directory, f) for f in files if f.endswith(".py"))
      for path in sorted(paths):
        digest.update(path[len(root) + 1:].replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as f:
          data = f.read()
        digest.update(struct.pack("<Q", len(data)) + data)
      with open(_runtime_library(), "rb") as f:
        digest.update(b"runtime\0" + hashlib.sha256(f.read()).digest())
      _fingerprint = f"v{writer.VERSION}-{digest.hexdigest()}"
    return _fingerprint


def _runtime_library() -> str:
  """The libtrn_runtime.so the bindings load (it sits next to them, built or installed)."""
  return os.path.join(os.path.dirname(os.path.abspath(_native.__file__)), "libtrn_runtime.so")


def make_key(code: bytes, fmt: str, compile_options: bytes, target: str,
             target_spec: dict | None = None) -> str:
  """The hex sha256 naming the entry of this compile."""
  digest = hashlib.sha256()
  spec = json.dumps(target_spec or {}, sort_keys=True, default=str).encode()
  for part in (compiler_fingerprint().encode(), bytes(code), fmt.encode(),
               bytes(compile_options or b""), target.encode(), spec):
    digest.update(struct.pack("<Q", len(part)) + part)
  return digest.hexdigest()


# --- reports -------------------------------------------------------------------------------------

# LoweredOp's fields are scalars: read directly, not through dataclasses.asdict, whose deep copy
# of every op was most of a store (the same JSON).
_OP_FIELDS = tuple(field.name for field in dataclasses.fields(LoweredOp))


def _meta_to_json(report, locations) -> bytes:
  return json.dumps({"module": report.module, "target": report.target,
                     "ops": [{name: getattr(op, name) for name in _OP_FIELDS}
                             for op in report.ops],
                     "sbuf_peak_bytes": report.sbuf_peak_bytes,
                     "psum_peak_bytes": report.psum_peak_bytes,
                     "donated_parameters": report.donated_parameters,
                     "replicated_ops": report.replicated_ops,
                     "float64_as_float32": report.float64_as_float32,
                     "instructions_per_stream": report.instructions_per_stream,
                     "locations": [list(loc) for loc in locations]},
                    separators=(",", ":")).encode()


def _meta_from_json(data: bytes) -> tuple[CompileReport, tuple[tuple[str, str], ...]]:
  doc = json.loads(data.decode())
  report = CompileReport(module=doc["module"], target=doc["target"],
                         ops=[LoweredOp(**op) for op in doc["ops"]],
                         sbuf_peak_bytes=doc["sbuf_peak_bytes"],
                         psum_peak_bytes=doc["psum_peak_bytes"],
                         donated_parameters=list(doc["donated_parameters"]),
                         replicated_ops=list(doc["replicated_ops"]),
                         float64_as_float32=bool(doc.get("float64_as_float32", False)),
                         instructions_per_stream=dict(doc["instructions_per_stream"]))
  return report, tuple((str(name), str(position)) for name, position in doc["locations"])


# --- entries -------------------------------------------------------------------------------------

def _path(directory: str, key: str, suffix: str = SUFFIX) -> str:
  return os.path.join(directory, key + suffix)


def load(key: str, suffix: str = SUFFIX) -> Entry | None:
  """The valid entry stored under `key` (an alias with ALIAS_SUFFIX), or None (absent, disabled,
  or invalid: an invalid entry is removed so that the recompile rewrites it)."""
  directory = cache_dir()
  if directory is None:
    return None
  path = _path(directory, key, suffix)
  data = _read(path)
  if data is None:
    return None
  entry = _decode(data, key)
  if entry is None:
    logger.warning("compile cache: ignoring corrupted entry %s", path)
    _remove(path)
    return None
  _touch(path)
  return entry


def _read(path: str) -> bytes | None:
  try:
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None
  except OSError as e:
    logger.warning("compile cache: cannot read %s: %s", path, e)
    return None


def _touch(path: str) -> None:
  try:
    os.utime(path)  # LRU: a hit makes the file the newest
  except OSError:
    pass


def _decode(data: bytes, key: str) -> Entry | None:
  if len(data) < _HEADER.size:
    return None
  magic, stored_key, program_len, meta_len, checksum = _HEADER.unpack_from(data)
  if magic != _MAGIC or _HEADER.size + program_len + meta_len != len(data):
    return None
  body = data[_HEADER.size:]
  if stored_key != bytes.fromhex(key) or hashlib.sha256(stored_key + body).digest() != checksum:
    return None
  try:
    report, locations = _meta_from_json(body[program_len:])
  except Exception:  # noqa: BLE001 — metadata of another layout: treat as corrupted
    return None
  return Entry(bytes(body[:program_len]), report, locations)


def _encode(key: str, entry: Entry) -> bytes:
  meta = _meta_to_json(entry.report, entry.locations)
  digest, body = bytes.fromhex(key), bytes(entry.program) + meta
  return _HEADER.pack(_MAGIC, digest, len(entry.program), len(meta),
                      hashlib.sha256(digest + body).digest()) + body


def store(key: str, entry: Entry, suffix: str = SUFFIX) -> bool:
  """Writes the entry (an alias with ALIAS_SUFFIX) atomically and evicts down to the cap; False
  when not stored."""
  directory = cache_dir()
  if directory is None:
    return False
  data = _encode(key, entry)
  limit = max_bytes()
  if len(data) > limit:
    logger.info("compile cache: %d-byte entry exceeds TRN_CACHE_MAX_BYTES=%d; not stored",
                len(data), limit)
    return False
  if not _write_atomically(directory, _path(directory, key, suffix), data):
    return False
  evict(directory, limit, keep=key + suffix)
  return True


def _write_atomically(directory: str, path: str, data: bytes) -> bool:
  tmp = None
  try:
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    os.replace(tmp, path)
    tmp = None
  except OSError as e:
    logger.warning("compile cache: cannot write to %s: %s", directory, e)
    return False
  finally:
    if tmp is not None:
      _remove(tmp)
  return True


def _remove(path: str) -> None:
  try:
    os.remove(path)
  except OSError:
    pass


def evict(directory: str | None = None, limit: int | None = None, keep: str | None = None) -> int:
  """Deletes the oldest entries and aliases (by mtime) but the file named `keep` until they total
  at most `limit` bytes, and temporary files left by crashed writers; returns the bytes they now
  hold."""
  directory = cache_dir() if directory is None else directory
  limit = max_bytes() if limit is None else limit
  if directory is None:
    return 0
  entries, total, now = [], 0, time.time()
  try:
    with os.scandir(directory) as it:
      for e in it:
        try:
          if not e.is_file(follow_symlinks=False):
            continue
          st = e.stat(follow_symlinks=False)
        except OSError:
          continue
        if e.name.startswith(".tmp-"):
          if now - st.st_mtime > _STALE_TMP_S:
            _remove(e.path)
          continue
        if e.name.endswith((SUFFIX, ALIAS_SUFFIX)):
          entries.append((st.st_mtime, e.name, e.path, st.st_size))
          total += st.st_size
  except OSError as e:
    logger.warning("compile cache: cannot list %s: %s", directory, e)
    return 0
  if total <= limit:
    return total
  for _, name, path, size in sorted(entries):
    if total <= limit:
      break
    if name == keep:
      continue
    _remove(path)
    total -= size
  return total
