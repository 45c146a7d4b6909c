"""Runs Python code in a fresh process, as a user's script would start: the backend is configured
once per process, so configuration and failure-isolation tests need their own."""

import glob
import os
import subprocess
import sys
import tempfile


def run_python(code: str, env: dict | None = None, timeout: int = 300,
               cwd: str | None = None) -> subprocess.CompletedProcess:
  """`python -c code` with `env` merged over ours, minus TRN_* (except the test session's
  TRN_CACHE_DIR) and JAX_PLATFORMS unless given.

  It starts in a neutral directory unless `cwd` is given: from the repository root, `-c` would
  import the source tree's jax_trn instead of the installed one."""
  child_env = {k: v for k, v in os.environ.items()
               if (not k.startswith("TRN_") or k == "TRN_CACHE_DIR") and k != "JAX_PLATFORMS"}
  child_env.update(env or {})
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=child_env, timeout=timeout, cwd=cwd or tempfile.gettempdir())


def source_tree_path(root: str) -> list[str]:
  """[root] when its jax_trn is built in place (cmake -DTRN_INPLACE=ON), else []: on a child's
  path, a source tree without its compiled libraries would shadow the installed jax-trn."""
  return [root] if glob.glob(os.path.join(root, "jax_trn", "_native*")) else []
