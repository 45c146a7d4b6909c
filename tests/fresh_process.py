"""Runs Python code in a fresh process, as a user's script would start: the backend is configured
once per process, so configuration and failure-isolation tests need their own."""

import glob
import os
import subprocess
import sys
import tempfile


def _child_env(env: dict | None) -> dict:
  """Our environment minus TRN_* (except the test session's TRN_CACHE_DIR) and JAX_PLATFORMS,
  with `env` merged over it."""
  child_env = {k: v for k, v in os.environ.items()
               if (not k.startswith("TRN_") or k == "TRN_CACHE_DIR") and k != "JAX_PLATFORMS"}
  child_env.update(env or {})
  return child_env


def run_python(code: str, env: dict | None = None, timeout: int = 300,
               cwd: str | None = None) -> subprocess.CompletedProcess:
  """`python -c code` with `env` merged over ours, minus TRN_* (except the test session's
  TRN_CACHE_DIR) and JAX_PLATFORMS unless given.

  It starts in a neutral directory unless `cwd` is given: from the repository root, `-c` would
  import the source tree's jax_trn instead of the installed one."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=_child_env(env), timeout=timeout, cwd=cwd or tempfile.gettempdir())


def run_script(path: str, env: dict | None = None,
               timeout: int = 300) -> subprocess.CompletedProcess:
  """`python path` as run_python runs code, from the script's directory: for children that
  start processes of their own (multiprocessing's spawn re-imports the main script)."""
  return subprocess.run([sys.executable, path], capture_output=True, text=True,
                        env=_child_env(env), timeout=timeout, cwd=os.path.dirname(path))


def source_tree_path(root: str) -> list[str]:
  """[root] when its jax_trn is built in place (cmake -DTRN_INPLACE=ON), else []: on a child's
  path, a source tree without its compiled libraries would shadow the installed jax-trn."""
  return [root] if glob.glob(os.path.join(root, "jax_trn", "_native*")) else []
