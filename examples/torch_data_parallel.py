"""DDP-style data-parallel training with PyTorch on every simulated NeuronCore: `xmp.spawn`
runs one thread per device `xla:0..N-1` (one process drives every simulated chip), each
replica trains the same model on its own batch, and `xm.optimizer_step` averages the gradients
with an all-reduce between the cores before the SGD step. Replica 0 also trains one model on
the CPU on every replica's batch (the mean of equal batches' mean losses is the whole batch's
mean loss): the two trajectories agree to float rounding.
Needs `pip install ".[torch]"`.

    PJRT_DEVICE=TRN python examples/torch_data_parallel.py [steps]
"""

import sys
from importlib import metadata

import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

if not any(ep.name == "trn" for ep in metadata.entry_points(group="torch_xla.plugins")):
  # A source tree built in place has no entry point: register the plugin by hand.
  from torch_xla.experimental import plugins
  from jax_trn.torch_plugin import TrnPlugin
  plugins.register_plugin("TRN", TrnPlugin())

BATCH = 32  # examples per replica


def model() -> nn.Module:
  # Its own generator: the replicas' threads share torch's global one.
  net = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 2))
  g = torch.Generator().manual_seed(0)
  with torch.no_grad():
    for p in net.parameters():
      p.copy_(torch.randn(p.shape, generator=g) * 0.5)
  return net


def batch(rank: int):
  """Two interleaved spirals: points and their class, a different draw per replica."""
  g = torch.Generator().manual_seed(1 + rank)
  t = torch.rand(BATCH, generator=g) * 3 * torch.pi + 0.5
  label = torch.randint(0, 2, (BATCH,), generator=g)
  sign = 1 - 2 * label
  points = torch.stack([t.cos() * t * sign, t.sin() * t * sign], 1) / 10
  return points + 0.02 * torch.randn(BATCH, 2, generator=g), label


def train(net, points, labels, step, sync, steps):
  opt = torch.optim.SGD(net.parameters(), lr=0.5)
  losses = []
  for _ in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(net(points), labels)
    loss.backward()
    step(opt)
    sync()
    losses.append(loss.item())
  return losses


def replica(index: int, steps: int) -> None:
  device = torch_xla.device()
  n, rank = xr.world_size(), xr.global_ordinal()
  points, labels = batch(rank)
  losses = train(model().to(device), points.to(device), labels.to(device), xm.optimizer_step,
                 torch_xla.sync, steps)
  # Every replica's loss is its own batch's; their mean is the whole batch's.
  means = xm.all_reduce(xm.REDUCE_SUM, torch.tensor(losses).to(device), scale=1.0 / n).cpu()
  if rank == 0:
    everything = [batch(r) for r in range(n)]
    cpu = train(model(), torch.cat([p for p, _ in everything]),
                torch.cat([lab for _, lab in everything]), lambda o: o.step(), lambda: None,
                steps)
    print(f"{n} replicas on {xr.device_type()}, {BATCH} examples each")
    print("step  loss (trn, mean over replicas)  loss (one CPU model)")
    for k, (trn_loss, cpu_loss) in enumerate(zip(means.tolist(), cpu)):
      print(f"{k:4d}  {trn_loss:.6f}                       {cpu_loss:.6f}")


if __name__ == "__main__":
  xmp.spawn(replica, args=(int(sys.argv[1]) if len(sys.argv) > 1 else 10,))
