"""PyTorch on several NeuronCores: torch_xla's replicated programs (SPMD off) and collectives.

`xmp.spawn` starts one process (every simulated chip lives in one client) running one thread per
device `xla:0..N-1`; each thread traces, compiles (num_replicas = N) and runs its own program,
and the runs meet at the collectives. Every result is checked against torch on the CPU, computed
in the child from every rank's inputs (torch_xla's own CPU backend cannot run collectives between
threads: its rendezvous waits forever for programs compiled separately per thread).
"""

import importlib.util
import json
import pathlib
import textwrap

import numpy as np
import pytest

from fresh_process import run_script

pytestmark = pytest.mark.slow  # a torch_xla child process: about a minute

_CHILD = textwrap.dedent("""
    import functools, json, os
    from importlib import metadata
    import torch, torch_xla
    if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
      # A source tree built in place has no entry point: register the plugin by hand.
      from torch_xla.experimental import plugins
      from jax_trn.torch_plugin import TrnPlugin
      plugins.register_plugin("TRN", TrnPlugin())
    import torch.nn as nn
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr
    import torch_xla.distributed.xla_multiprocessing as xmp


    def data(rank, *shape):
      return torch.randn(*shape, generator=torch.Generator().manual_seed(100 + rank))


    def ints(rank):
      return torch.arange(8, dtype=torch.int32) * (rank + 1) - 3


    def model():
      # Initialized from a generator of its own: the threads share torch's global one.
      net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
      g = torch.Generator().manual_seed(0)
      with torch.no_grad():
        for p in net.parameters():
          p.copy_(torch.randn(p.shape, generator=g) * 0.3)
      return net


    def train(net, opt, step, xs, ys, sync, steps=5):
      losses = []
      for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(xs), ys)
        loss.backward()
        step(opt)
        sync()
        losses.append(loss.item())
      return losses, net[0].weight.detach().cpu().tolist()


    def collectives(n, x, i):
      pairs = [[2 * k, 2 * k + 1] for k in range(n // 2)]
      return {
          "sum": xm.all_reduce(xm.REDUCE_SUM, x),
          "mean": xm.all_reduce(xm.REDUCE_SUM, x, scale=1.0 / n),
          "max": xm.all_reduce(xm.REDUCE_MAX, x),
          "min": xm.all_reduce(xm.REDUCE_MIN, x),
          "int_sum": xm.all_reduce(xm.REDUCE_SUM, i),
          "pair_sum": xm.all_reduce(xm.REDUCE_SUM, x, groups=pairs),
          "gather": xm.all_gather(x, dim=0),
          "gather_dim1": xm.all_gather(x, dim=1),
          "pair_gather": xm.all_gather(x, dim=0, groups=pairs),
          "reduce_scatter": xm.reduce_scatter(xm.REDUCE_SUM, x, scale=1.0, scatter_dim=0,
                                              shard_count=n),
          "all_to_all": xm.all_to_all(x, split_dimension=0, concat_dimension=1, split_count=n),
          "permute": xm.collective_permute(x, pairs=[[k, (k + 1) % n] for k in range(n)]),
      }


    def expected(n, rank):
      xs, ii = [data(r, 8, 6) for r in range(n)], [ints(r) for r in range(n)]
      fold = lambda op, vs: functools.reduce(op, vs)  # group order, as the cores fold
      pair = [2 * (rank // 2), 2 * (rank // 2) + 1]
      total = fold(torch.add, xs)
      return {
          "sum": total, "mean": total * (1.0 / n),
          "max": fold(torch.maximum, xs), "min": fold(torch.minimum, xs),
          "int_sum": fold(torch.add, ii),
          "pair_sum": xs[pair[0]] + xs[pair[1]],
          "gather": torch.cat(xs, 0), "gather_dim1": torch.cat(xs, 1),
          "pair_gather": torch.cat([xs[pair[0]], xs[pair[1]]], 0),
          "reduce_scatter": total.chunk(n, 0)[rank],
          "all_to_all": torch.cat([x.chunk(n, 0)[rank] for x in xs], 1),
          "permute": xs[(rank - 1) % n],
      }


    def run(index):
      dev = torch_xla.device()
      n, rank = xr.world_size(), xr.global_ordinal()
      out = {"rank": rank, "index": index, "world": n, "device": str(dev),
             "device_count": xr.global_runtime_device_count()}
      got = collectives(n, data(rank, 8, 6).to(dev), ints(rank).to(dev))
      torch_xla.sync()
      want = expected(n, rank)
      out["trn"] = {k: v.cpu().tolist() for k, v in got.items()}
      out["cpu"] = {k: v.tolist() for k, v in want.items()}
      # DDP-style data parallel: each rank its own batch, gradients averaged by optimizer_step.
      net = model().to(dev)
      out["ddp"] = train(net, torch.optim.SGD(net.parameters(), lr=0.2), xm.optimizer_step,
                         data(rank, 4, 6).to(dev), data(50 + rank, 4, 3).to(dev), torch_xla.sync)
      # The same on the CPU: one model on every rank's batch (the mean of equal batches' means).
      net = model()
      out["ddp_cpu"] = train(net, torch.optim.SGD(net.parameters(), lr=0.2), lambda o: o.step(),
                             torch.cat([data(r, 4, 6) for r in range(n)]),
                             torch.cat([data(50 + r, 4, 3) for r in range(n)]), lambda: None)
      # A file per rank: the threads' prints would interleave.
      with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"rank{rank}.json"),
                "w") as f:
        json.dump(out, f)


    if __name__ == "__main__":
      xmp.spawn(run)
""")


def _ranks(tmp_path, env: dict) -> list[dict]:
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  script = tmp_path / "replicated.py"
  script.write_text(_CHILD)
  result = run_script(str(script), {"PJRT_DEVICE": "TRN", **env}, timeout=900)
  assert result.returncode == 0, result.stderr[-4000:]
  ranks = [json.loads(p.read_text()) for p in tmp_path.glob("rank*.json")]
  return sorted(ranks, key=lambda r: r["rank"])


@pytest.fixture(scope="module")
def four_cores(tmp_path_factory) -> list[dict]:
  return _ranks(tmp_path_factory.mktemp("torch4"), {})  # one trn2 chip at LNC=2


@pytest.fixture(scope="module")
def two_chips(tmp_path_factory) -> list[dict]:
  return _ranks(tmp_path_factory.mktemp("torch8"), {"TRN_CHIPS": "2"})


def test_every_device_runs_one_replica(four_cores):
  assert [r["rank"] for r in four_cores] == [0, 1, 2, 3]
  assert [r["device"] for r in four_cores] == [f"xla:{k}" for k in range(4)]
  assert {(r["world"], r["device_count"]) for r in four_cores} == {(4, 4)}


@pytest.mark.parametrize("case", ["sum", "mean", "max", "min", "int_sum", "pair_sum", "gather",
                                  "gather_dim1", "pair_gather", "reduce_scatter", "all_to_all",
                                  "permute"])
def test_collectives_match_the_cpu(four_cores, case):
  for rank in four_cores:
    trn, cpu = np.asarray(rank["trn"][case]), np.asarray(rank["cpu"][case])
    # Sums fold in group order, as the CPU reference does: bit-identical.
    np.testing.assert_array_equal(trn, cpu, err_msg=f"{case} on rank {rank['rank']}")


def test_optimizer_step_averages_gradients_like_one_cpu_model(four_cores):
  for rank in four_cores:
    (losses, weight), (cpu_losses, cpu_weight) = rank["ddp"], rank["ddp_cpu"]
    np.testing.assert_allclose(weight, cpu_weight, rtol=1e-5, atol=1e-6)
  # Every replica holds the same averaged model; each reports its own batch's loss.
  assert len({json.dumps(r["ddp"][1]) for r in four_cores}) == 1
  assert np.mean([r["ddp"][0] for r in four_cores], axis=0) == pytest.approx(
      four_cores[0]["ddp_cpu"][0], rel=1e-5)


def test_collectives_across_two_chips(two_chips):
  assert [r["device"] for r in two_chips] == [f"xla:{k}" for k in range(8)]
  for rank in two_chips:
    for case, cpu in rank["cpu"].items():
      np.testing.assert_array_equal(rank["trn"][case], cpu, err_msg=f"{case}, rank {rank['rank']}")
    np.testing.assert_allclose(rank["ddp"][1], rank["ddp_cpu"][1], rtol=1e-5, atol=1e-6)


def test_data_parallel_example_follows_one_cpu_model():
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  example = pathlib.Path(__file__).parents[1] / "examples" / "torch_data_parallel.py"
  result = run_script(str(example), {"PJRT_DEVICE": "TRN"}, timeout=900)
  assert result.returncode == 0, result.stderr[-4000:]
  rows = [line.split() for line in result.stdout.splitlines() if line[:4].strip().isdigit()]
  assert len(rows) == 10
  trn, cpu = np.array([[float(r[1]), float(r[2])] for r in rows]).T
  np.testing.assert_allclose(trn, cpu, rtol=1e-5)
