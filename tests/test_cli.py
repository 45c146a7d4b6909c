"""The jax-trn command line: info, compile and disasm on a real program."""

import jax
import jax.numpy as jnp
import numpy as np

from jax_trn import cli


def test_info_describes_the_configuration(capsys):
  assert cli.main(["info"]) == 0
  out = capsys.readouterr().out
  assert "target trn2" in out and "4 devices" in out and "sbuf_bytes_per_partition" in out


def test_compile_then_disasm(tmp_path, capsys):
  source = tmp_path / "f.mlir"
  source.write_text(jax.jit(lambda x: jnp.tanh(x) * 2).lower(
      np.ones((130, 7), np.float32)).as_text())
  program = tmp_path / "f.trnprog"
  assert cli.main(["compile", str(source), "-o", str(program)]) == 0
  assert "stablehlo.tanh" in capsys.readouterr().out
  assert cli.main(["disasm", str(program)]) == 0
  listing = capsys.readouterr().out
  assert "activation" in listing and "dma_copy" in listing


def test_disasm_refuses_garbage(tmp_path, capsys):
  bad = tmp_path / "bad.trnprog"
  bad.write_bytes(b"not a program")
  assert cli.main(["disasm", str(bad)]) == 1
  assert "not a valid NeuronCore program" in capsys.readouterr().err


def test_compile_splits_work_between_the_cores_the_lnc_names(tmp_path, capsys):
  source = tmp_path / "big.mlir"  # 4 MiB of elementwise work: large enough to split at LNC=2
  source.write_text(jax.jit(lambda x: jnp.tanh(x) * 2).lower(
      np.ones((1024, 1024), np.float32)).as_text())
  listings = {}
  for lnc in ("default", "1"):
    program = tmp_path / f"big-{lnc}.trnprog"
    extra = [] if lnc == "default" else ["--lnc", lnc]
    assert cli.main(["compile", str(source), "-o", str(program), *extra]) == 0
    capsys.readouterr()
    assert cli.main(["disasm", str(program)]) == 0
    listings[lnc] = capsys.readouterr().out
  assert "physical cores 2" in listings["default"] and "stream ACT@1:" in listings["default"]
  assert "physical cores" not in listings["1"] and "stream ACT@1:" not in listings["1"]


def test_compile_refuses_an_lnc_the_target_lacks(tmp_path, capsys):
  source = tmp_path / "f.mlir"
  source.write_text(jax.jit(lambda x: x + 1).lower(np.ones(4, np.float32)).as_text())
  code = cli.main(["compile", str(source), "-o", str(tmp_path / "f"), "--target", "trn1",
                   "--lnc", "2"])
  assert code == 1
  assert "trn1 supports LNC [1], got lnc=2" in capsys.readouterr().err
