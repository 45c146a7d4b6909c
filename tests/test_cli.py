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
