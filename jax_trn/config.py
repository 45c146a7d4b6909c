"""How many simulated Trainium chips, of which generation, at which Logical NeuronCore size.

Read once, when the trn backend starts: from `jax_trn.configure(...)` if called, else from the
environment (TRN_TARGET, TRN_CHIPS, TRN_LNC, TRN_HBM_BYTES, TRN_FLOAT64), else the defaults of
a trn2 instance (one chip, LNC=2: four devices). The values travel to the C++ client as PJRT
create options.
`float64` (TRN_FLOAT64) is "error" (float64 arrays and programs are refused: NeuronCores have no
float64) or "float32" (they are accepted and computed as float32, a warning per compile).
`strict` (TRN_STRICT) is the compile service's policy, read at every compile
(jax_trn/compilation.py): no op may run on the GpSimd general-purpose path.
"""

from __future__ import annotations

import dataclasses
import os

from jax_trn import _jax_private, _native



@dataclasses.dataclass(frozen=True)
class TrnConfig:
  target: str = "trn2"
  chips: int = 1
  lnc: int | None = None        # None: the generation's default
  hbm_bytes: int | None = None  # per device; None: HBM per chip / devices per chip
  strict: bool = False          # a GpSimd general-path op is a compile error
  float64: str = "error"        # "float32": float64 arrays accepted, computed as float32

  def resolved_lnc(self) -> int:
    return self.lnc if self.lnc is not None else target_spec(self.target)["default_lnc"]

  def devices_per_chip(self) -> int:
    return target_spec(self.target)["physical_cores_per_chip"] // self.resolved_lnc()

  def client_options(self) -> dict[str, str | int]:
    options: dict[str, str | int] = {
        "target": self.target, "chips": self.chips, "lnc": self.resolved_lnc()}
    if self.hbm_bytes is not None:
      options["hbm_bytes"] = self.hbm_bytes
    if self.float64 == "float32":
      options["float64_arrays"] = 1
    return options


def target_spec(target: str) -> dict:
  names = _native.target_names()
  if target not in names:
    raise ValueError(f"unknown Trainium target {target!r}: expected one of {', '.join(names)}")
  return _native.target_spec(target)


def check_lnc(target: str, lnc: int) -> None:
  """ValueError unless `target` has a Logical NeuronCore size of `lnc` (1, or the generation's
  default)."""
  allowed = sorted({1, target_spec(target)["default_lnc"]})
  if lnc not in allowed:
    raise ValueError(f"{target} supports LNC {allowed}, got lnc={lnc!r}")


def _validated(config: TrnConfig) -> TrnConfig:
  target_spec(config.target)
  if not isinstance(config.chips, int) or config.chips < 1:
    raise ValueError(f"chips must be a positive integer, got {config.chips!r}")
  if config.lnc is not None:
    check_lnc(config.target, config.lnc)
  if config.hbm_bytes is not None and config.hbm_bytes <= 0:
    raise ValueError(f"hbm_bytes must be positive, got {config.hbm_bytes!r}")
  if config.float64 not in FLOAT64_POLICIES:
    raise ValueError(f"float64 must be one of {', '.join(map(repr, FLOAT64_POLICIES))}, "
                     f"got {config.float64!r}")
  return config


FLOAT64_POLICIES = ("error", "float32")


def _int_env(name: str) -> int | None:
  raw = os.environ.get(name)
  if raw is None or raw == "":
    return None
  try:
    return int(raw, 0)
  except ValueError:
    raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def _bool_env(name: str) -> bool:
  raw = os.environ.get(name, "").strip().lower()
  if raw in ("", "0", "false", "no", "off"):
    return False
  if raw in ("1", "true", "yes", "on"):
    return True
  raise ValueError(f"environment variable {name}={raw!r} is not a boolean (use 1 or 0)")


def from_environment() -> TrnConfig:
  chips = _int_env("TRN_CHIPS")
  return _validated(TrnConfig(
      target=os.environ.get("TRN_TARGET", "trn2") or "trn2",
      chips=1 if chips is None else chips,
      lnc=_int_env("TRN_LNC"),
      hbm_bytes=_int_env("TRN_HBM_BYTES"),
      strict=_bool_env("TRN_STRICT"),
      float64=os.environ.get("TRN_FLOAT64", "error") or "error"))


_configured: TrnConfig | None = None


def configure(*, target: str | None = None, chips: int | None = None, lnc: int | None = None,
              hbm_bytes: int | None = None, strict: bool | None = None,
              float64: str | None = None) -> TrnConfig:
  """Sets the simulated system before the trn backend starts; unset fields keep the environment's.
  `strict=True`: an op that would run on the GpSimd general path fails its compile instead.
  `float64="float32"`: float64 arrays are accepted and every program computes float64 as float32
  (a warning per compile; docs/numerics.md)."""
  global _configured
  if _backend_started():
    raise RuntimeError(
        "jax_trn.configure() must be called before the trn backend starts "
        "(before the first jax.devices(), jit or device_put)")
  base = from_environment()
  _configured = _validated(dataclasses.replace(
      base,
      target=base.target if target is None else target,
      chips=base.chips if chips is None else chips,
      lnc=lnc if lnc is not None else (base.lnc if target is None else None),
      hbm_bytes=base.hbm_bytes if hbm_bytes is None else hbm_bytes,
      strict=base.strict if strict is None else bool(strict),
      float64=base.float64 if float64 is None else float64))
  return _configured


def current() -> TrnConfig:
  return _configured if _configured is not None else from_environment()


def _backend_started() -> bool:
  return _jax_private.backend_started("trn")
