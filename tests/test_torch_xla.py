"""PyTorch on trn through torch_xla (PJRT_DEVICE=TRN), checked against torch on the CPU.

torch and torch_xla are an optional install (`pip install ".[torch]"`); without torch_xla the
torch tests skip. They run in one fresh process (`PJRT_DEVICE` selects the backend once per
process, and importing torch here would cost every other test seconds and a GiB): the child runs
each case on the trn device and on the CPU and prints both. The compiler's replica handling,
which torch_xla relies on, is tested without torch.
"""

import importlib.util
import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import compiler_harness as harness
from cpu_reference import assert_close
from fresh_process import run_python
from hlo_lowering.errors import CompileError
from jax_trn import compilation

_CHILD = textwrap.dedent("""
    import json
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

    dev = xm.xla_device()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 130, generator=g)
    y = torch.randn(4, 130, generator=g)
    out = {"device_type": xr.device_type(), "device_count": xr.global_runtime_device_count()}

    def both(fn, *args):
      trn = fn(*(a.to(dev) for a in args)).cpu()
      cpu = fn(*args)
      return {"trn": trn.float().tolist(), "cpu": cpu.float().tolist(), "dtype": str(trn.dtype)}

    out["elementwise"] = {
        "affine": both(lambda a: a * 2 + 1, x),
        "add_mul_sub_div": both(lambda a, b: (a + b) * (a - b) / (b.abs() + 1), x, y),
        "relu_where_max": both(lambda a, b: torch.where(a > b, torch.relu(a), torch.maximum(a, b)),
                               x, y),
        "exp_tanh": both(lambda a: torch.exp(a * 0.5) + torch.tanh(a), x),
        "sum_mean": both(lambda a: a.sum(1) + a.mean(0).sum(), x),
        "softmax": both(lambda a: torch.softmax(a, -1), x),
        "gelu": both(nn.functional.gelu, x),
    }
    a, b = torch.randn(16, 64, generator=g), torch.randn(64, 32, generator=g)
    out["matmul"] = {"mm": both(torch.matmul, a, b),
                     "bmm": both(torch.bmm, a.reshape(2, 8, 64), b.t().reshape(2, 16, 64).transpose(1, 2)),
                     "linear": both(lambda a, w: nn.functional.linear(a, w), a, b.t())}
    xb, yb = x.bfloat16(), y.bfloat16()
    out["bf16"] = {"add_mul": both(lambda a, b: a * b + a, xb, yb),
                   "matmul": both(lambda a, b: a @ b, xb[:, :64], yb[:, :64].t())}

    def train(device, steps=10):
      torch.manual_seed(0)
      model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
      opt = torch.optim.SGD(model.parameters(), lr=0.1)
      gen = torch.Generator().manual_seed(1)
      data = torch.randn(8, 16, generator=gen).to(device)
      labels = torch.randint(0, 4, (8,), generator=gen).to(device)
      targets = torch.randn(8, 4, generator=gen).to(device)
      losses = []
      for step in range(steps):
        opt.zero_grad()
        logits = model(data)
        loss = (nn.functional.cross_entropy(logits, labels) if step % 2 == 0
                else nn.functional.mse_loss(logits, targets))
        loss.backward()
        opt.step()
        torch_xla.sync()
        losses.append(loss.item())
      return losses
    out["training"] = {"trn": train(dev), "cpu": train("cpu")}

    # Another device runs the same replicated program torch_xla compiled for device 0.
    out["second_device"] = (torch.arange(4.0, device="xla:1") * 3).cpu().tolist()

    # torch_xla lowers batch norm to HLO batch-norm-training, which JAX never emits.
    images = torch.randn(2, 3, 9, 9, generator=g)
    kernel = torch.randn(4, 3, 3, 3, generator=g)
    out["layers"] = {
        "batch_norm": both(lambda a: nn.functional.batch_norm(a, None, None, training=True), x),
        "layer_norm": both(lambda a: nn.functional.layer_norm(a, a.shape[-1:]), x),
        "conv2d": both(lambda a, k: nn.functional.conv2d(a, k, padding=1), images, kernel),
        "max_pool": both(lambda a: nn.functional.max_pool2d(a, 2), images),
        "cumsum": both(lambda a: torch.cumsum(a, dim=-1), x),
    }
    # torch_xla reduces (value, index) with XLA's select body, which JAX never emits.
    ties = torch.randint(-2, 3, (5, 7), generator=g).float()
    ties[1, 2] = -0.0
    out["arg_reduce"] = {
        **{f"{f.__name__}_{d}": both(lambda a, f=f, d=d: f(a, d), ties)
           for f in (torch.argmax, torch.argmin) for d in (0, 1, -1)},
        "argmax_flat": both(torch.argmax, ties),
        "argmin_int": both(lambda a: torch.argmin(a.int(), 1), ties),
        "max_dim_values": both(lambda a: torch.max(a, 1).values, ties),
        "max_dim_indices": both(lambda a: torch.max(a, 1).indices, ties),
        "min_dim_values": both(lambda a: torch.min(a, 0).values, ties),
        "min_dim_indices": both(lambda a: torch.min(a, 0).indices, ties),
    }
    nans = ties.clone()
    nans[0, 3] = nans[2, 6] = nans[3, 0] = nans[3, 4] = float("nan")
    out["arg_reduce_nan"] = {"x": [[repr(v) for v in row] for row in nans.tolist()],
                             "argmax": torch.argmax(nans.to(dev), 1).cpu().tolist(),
                             "argmin": torch.argmin(nans.to(dev), 1).cpu().tolist(),
                             "max": [repr(v) for v in torch.max(nans.to(dev), 1).values.cpu().tolist()]}

    # Python numbers reach the plugin as f64[] arguments (narrow-float64).
    inf = x.clone()
    inf[0, 0], inf[1, 1], inf[2, 2] = float("inf"), float("-inf"), float("nan")
    out["python_numbers"] = {
        "addcmul": both(lambda a, b: torch.addcmul(a, a, b, value=0.3), x, y),
        "addcdiv": both(lambda a, b: torch.addcdiv(a, a, b.abs() + 1, value=-0.7), x, y),
        "greater": both(lambda a: a > 0.5, x),
        "isinf": both(torch.isinf, inf),
        "masked_fill": both(lambda a: a.masked_fill(a > 0, 0.5), x),
        "clamp": both(lambda a: a.clamp(-0.25, 0.75), x),
    }
    out["bool_reduce"] = {
        "any": both(lambda a: (a > 2).any(), x), "all": both(lambda a: (a > -4).all(), x),
        "any_dim": both(lambda a: (a > 1.5).any(1), x), "all_dim": both(lambda a: (a < 1).all(0), x),
    }

    def refusal(fn):
      try:
        fn()
        return "no error"
      except Exception as e:
        return f"{type(e).__name__}: {e}"
    out["refused"] = {
        "double_upload": refusal(lambda: x.double().to(dev)),
        "double_result": refusal(lambda: x.to(dev).double().cpu()),
        "randperm": refusal(lambda: torch.randperm(8, device=dev).cpu()),
    }
    out["after_refusals"] = both(lambda a: a * 2 - 1, x)
    # torch_xla takes the IR out of the tensors it syncs before it compiles and gives them their
    # data only after the compile succeeded (ExtractIRAndPrepareXlaData_), so a tensor whose
    # graph was refused keeps neither while it is alive; the plugin keeps nothing.
    failed = torch.randperm(8, device=dev)
    refusal(lambda: failed.cpu())
    out["failed_compile"] = {"sync_while_alive": refusal(torch_xla.sync)}
    del failed
    out["failed_compile"]["sync_after_del"] = refusal(torch_xla.sync)
    out["failed_compile"]["next_graph"] = (torch.arange(3.0, device=dev) * 2).cpu().tolist()

    # decompose-triangular-solve
    tri = torch.tril(torch.randn(5, 5, generator=g)) + 5 * torch.eye(5)
    out["triangular_solve"] = both(
        lambda b, a: torch.triangular_solve(b, a, upper=False).solution, torch.randn(5, 3, generator=g), tri)
    # torch_xla's info check reduces the int info with a != 0 body (expand-truth-reduce).
    spd = torch.randn(4, 4, generator=g)
    spd = spd @ spd.T + 4 * torch.eye(4)
    out["cholesky"] = both(torch.linalg.cholesky, spd)
    out["after_error"] = (torch.ones(2, device=dev) + 1).cpu().tolist()

    try:  # on-device RNG: torch_xla emits rng_bit_generator (decompose-rng-bit-generator)
      xm.set_rng_state(1234)
      u = torch.rand(4096, device=dev).cpu()
      d = nn.functional.dropout(torch.ones(4096, device=dev), p=0.5).cpu()
      out["rng"] = {"min": u.min().item(), "max": u.max().item(), "mean": u.mean().item(),
                    "dropout_zero_fraction": (d == 0).float().mean().item(),
                    "dropout_kept": sorted(set(d[d != 0].tolist()))}
    except Exception as e:
      out["rng"] = {"error": f"{type(e).__name__}: {e}"}

    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def torch_run() -> dict:
  # importorskip would import torch into this process; the child needs it, this one does not.
  if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed (pip install '.[torch]')")
  result = run_python(_CHILD, {"PJRT_DEVICE": "TRN"}, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _close(case: dict, rtol: float, atol: float) -> None:
  trn, cpu = np.asarray(case["trn"]), np.asarray(case["cpu"])
  assert trn.shape == cpu.shape
  np.testing.assert_allclose(trn, cpu, rtol=rtol, atol=atol)


def test_pjrt_device_trn_lists_the_simulated_neuroncores(torch_run):
  assert torch_run["device_type"] == "TRN"
  assert torch_run["device_count"] == 4  # one trn2 chip at LNC=2


@pytest.mark.parametrize("name", ["affine", "add_mul_sub_div", "relu_where_max", "exp_tanh",
                                  "sum_mean", "softmax", "gelu"])
def test_elementwise_and_reductions_match_cpu(torch_run, name):
  case = torch_run["elementwise"][name]
  assert case["dtype"] == "torch.float32"
  _close(case, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["mm", "bmm", "linear"])
def test_matmul_matches_cpu(torch_run, name):
  _close(torch_run["matmul"][name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["add_mul", "matmul"])
def test_bfloat16_stays_bfloat16_and_matches_cpu(torch_run, name):
  case = torch_run["bf16"][name]
  assert case["dtype"] == "torch.bfloat16"
  scale = 8 if name == "matmul" else 1  # a 64-term sum rounds in bf16 on either side
  _close(case, rtol=1.6e-2 * scale, atol=1e-2 * scale)


@pytest.mark.parametrize("name", ["batch_norm", "layer_norm", "conv2d", "max_pool", "cumsum"])
def test_model_layers_match_cpu(torch_run, name):
  _close(torch_run["layers"][name], rtol=1e-4, atol=1e-4)


def test_ten_training_steps_follow_the_cpu_losses(torch_run):
  trn, cpu = torch_run["training"]["trn"], torch_run["training"]["cpu"]
  assert len(trn) == 10 and trn[-1] < trn[0]
  np.testing.assert_allclose(trn, cpu, rtol=1e-4, atol=1e-5)


def test_replicated_program_runs_on_another_device(torch_run):
  assert torch_run["second_device"] == [0.0, 3.0, 6.0, 9.0]


@pytest.mark.parametrize("name", [f"{f}_{d}" for f in ("argmax", "argmin") for d in (0, 1, -1)] +
                         ["argmax_flat", "argmin_int", "max_dim_values", "max_dim_indices",
                          "min_dim_values", "min_dim_indices"])
def test_argmax_argmin_and_max_dim_match_cpu_with_ties(torch_run, name):
  case = torch_run["arg_reduce"][name]
  assert case["trn"] == case["cpu"], case  # ties take the smallest index, as on the CPU


def test_argmax_with_nan_follows_xla_select_body(torch_run):
  """torch_xla's body never keeps a NaN (docs/program-format.md, gp_arg_reduce body 1): the fold
  restarts after it, so a row's answer is the arg-extremum of what follows its last NaN. torch on
  the CPU returns the first NaN's index instead; torch.max's values still propagate NaN."""
  case = torch_run["arg_reduce_nan"]
  rows = [[float(v) for v in row] for row in case["x"]]

  def fold(row, better):
    acc, acc_i = None, 0
    for i, v in enumerate(row):
      keep = acc is not None and better(acc, v)
      acc_i = min(acc_i, i) if acc == v else (acc_i if keep else i)
      acc = acc if keep else v
    return acc_i

  assert case["argmax"] == [fold(row, lambda a, b: a >= b) for row in rows]
  assert case["argmin"] == [fold(row, lambda a, b: a <= b) for row in rows]
  assert case["argmax"][2] == 6 and case["argmax"][3] != 0  # a NaN last survives, others not
  assert [v == "nan" for v in case["max"]] == [any(v != v for v in row) for row in rows]


@pytest.mark.parametrize("name", ["addcmul", "addcdiv", "greater", "isinf", "masked_fill",
                                  "clamp"])
def test_python_numbers_run_as_float32_and_match_cpu(torch_run, name):
  """The numbers are rounded to f32 (docs/numerics.md); torch on the CPU rounds them the same way
  when it combines them with f32 tensors, and none of x lies between 0.5 and f32(0.5)."""
  case = torch_run["python_numbers"][name]
  assert case["dtype"] == ("torch.bool" if name in ("greater", "isinf") else "torch.float32")
  _close(case, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["any", "all", "any_dim", "all_dim"])
def test_bool_reductions_match_cpu(torch_run, name):
  case = torch_run["bool_reduce"][name]
  assert case["dtype"] == "torch.bool" and case["trn"] == case["cpu"]


def test_float64_tensors_are_refused_and_the_next_graph_runs(torch_run):
  refused = torch_run["refused"]
  assert "NeuronCores have no float64 type: cannot place a f64[4,130] array" in refused["double_upload"]
  assert "result 0 of the program is float64 [4, 130]" in refused["double_result"]
  assert ".float()" in refused["double_result"]
  _close(torch_run["after_refusals"], rtol=0, atol=0)


def test_failed_compile_leaves_the_plugin_usable(torch_run):
  """After a refused graph, torch_xla's sync fails on its own state ("Check failed: tensor_data",
  torch_xla/csrc/xla_graph_executor.cpp) while the refused tensor is alive, whatever the
  backend; once it is gone, syncs and new graphs run."""
  case = torch_run["failed_compile"]
  assert "Check failed: tensor_data" in case["sync_while_alive"]
  assert case["sync_after_del"] == "no error"
  assert case["next_graph"] == [0.0, 2.0, 4.0]


def test_randperm_imports_and_names_what_is_unsupported(torch_run):
  """Its shuffle's vector-indexed dynamic slices now import (legacy_index_vectors); the
  shuffle draws with stablehlo.rng, which has no lowering."""
  message = torch_run["refused"]["randperm"]
  assert "not valid StableHLO" not in message
  assert "stablehlo.rng is not supported on NeuronCores" in message, message


def test_cholesky_matches_cpu(torch_run):
  _close(torch_run["cholesky"], rtol=1e-5, atol=1e-5)
  _close(torch_run["triangular_solve"], rtol=1e-5, atol=1e-5)


def test_unsupported_op_fails_with_a_clear_error(torch_run):
  message = torch_run["refused"]["randperm"]  # stablehlo.rng: no lowering rule
  assert "is not supported on NeuronCores" in message, message
  assert "[trn plugin, PJRT_Client_Compile]" in message
  assert torch_run["after_error"] == [2.0, 2.0]


# torch_xla compiles every program with num_replicas = device count.

_ADD = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""

_REPLICA_ID = """
func.func @main(%a: tensor<4xf32>) -> tensor<ui32> {
  %0 = stablehlo.replica_id : tensor<ui32>
  return %0 : tensor<ui32>
}"""


def test_replicated_program_without_collectives_compiles():
  program = harness.compile_code(_ADD.encode(), num_replicas=4)
  assert program == harness.compile_code(_ADD.encode())


def test_replicated_program_reads_its_replica_as_the_core_rank():
  """torch_xla's replicated programs may communicate (tests/test_torch_xla_multi_device.py):
  replica_id is the core's rank, not the constant 0 of a one-replica program."""
  replicated = harness.compile_code(_REPLICA_ID.encode(), num_replicas=4)
  assert replicated != harness.compile_code(_REPLICA_ID.encode())
  alone = harness.run_program(harness.compile_code(_REPLICA_ID.encode()), [np.zeros(4, np.float32)])
  assert int(alone[0]) == 0
  with pytest.raises(CompileError, match="replicated and partitioned") as info:
    harness.compile_code(_ADD.encode(), num_replicas=2, num_partitions=2)
  assert info.value.code == "UNIMPLEMENTED"


def test_hlo_forms_torch_xla_sends_compile_and_run():
  """HLO protos convert to stablehlo.dot and mhlo.erf, which JAX's StableHLO never holds."""
  harness.native()
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32)
  f = lambda a, b: jax.lax.erf(jnp.dot(a, b) * 0.1)
  proto = jax.jit(f).lower(a, b).compiler_ir("hlo").as_serialized_hlo_module_proto()
  program = harness.compile_code(proto, "hlo", num_replicas=4)
  summary = compilation.last_report().summary()
  assert "stablehlo.dot_general" in summary and "mhlo.erf" not in summary, summary
  cpu = jax.devices("cpu")[0]
  expected = jax.jit(f)(jax.device_put(a, cpu), jax.device_put(b, cpu))
  assert_close(harness.run_program(program, [a, b]), [np.asarray(expected)], scale=10)


def test_on_device_rng_is_uniform_and_dropout_scales(torch_run):
  rng = torch_run["rng"]
  assert "error" not in rng, rng.get("error")
  assert 0.0 <= rng["min"] and rng["max"] < 1.0 and abs(rng["mean"] - 0.5) < 0.03
  assert abs(rng["dropout_zero_fraction"] - 0.5) < 0.05 and rng["dropout_kept"] == [2.0]
