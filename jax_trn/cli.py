"""`jax-trn`: look at the simulated system and at NeuronCore programs from the shell.

    jax-trn info                      the configuration and the generation's hardware figures
    jax-trn compile f.mlir -o f.trnprog [--target T] [--lnc N]
                                         compile StableHLO text (e.g. jax.jit(f).lower(x).as_text())
                                         for a device of N physical cores (default: T's LNC)
    jax-trn disasm f.trnprog             the instruction streams of a program, with source lines
    jax-trn coverage [--write|--check]   how every StableHLO op lowers (docs/coverage.md)
    jax-trn profile [--html r.html] script.py [args]  run a script with the timeline recorded;
                                         report its last trn execution (docs/profiling.md)
"""

from __future__ import annotations

import argparse
import pathlib
import sys


def _info(_: argparse.Namespace) -> int:
  from jax_trn import config
  current = config.current()
  spec = config.target_spec(current.target)
  print(f"target {current.target} ({spec['core_version']}, simulated), {current.chips} chip(s), "
        f"LNC={current.resolved_lnc()}: {current.chips * current.devices_per_chip()} devices")
  for key, value in spec.items():
    print(f"  {key:<28} {value}")
  return 0


def _compile(args: argparse.Namespace) -> int:
  from hlo_lowering.errors import CompileError
  from jax_trn import compilation, config
  try:
    lnc = args.lnc if args.lnc is not None else config.target_spec(args.target)["default_lnc"]
    program = compilation.compile_text(pathlib.Path(args.source).read_text(), target=args.target,
                                       lnc=lnc)
  except (CompileError, ValueError) as e:
    print(f"jax-trn: {e}", file=sys.stderr)
    return 1
  pathlib.Path(args.output).write_bytes(program)
  print(compilation.last_report())
  return 0


def _disasm(args: argparse.Namespace) -> int:
  from hlo_lowering.program.reader import disassemble
  try:
    print(disassemble(pathlib.Path(args.program).read_bytes()))
  except ValueError as e:
    print(f"jax-trn: {args.program} is not a valid NeuronCore program: {e}", file=sys.stderr)
    return 1
  return 0


def _coverage(args: argparse.Namespace) -> int:
  from hlo_lowering import coverage
  return coverage.run(args)


def _profile(args: argparse.Namespace) -> int:
  import runpy
  from jax_trn import profile
  saved_argv = sys.argv
  sys.argv = [args.script] + list(args.args)
  try:
    with profile.trace():
      runpy.run_path(args.script, run_name="__main__")
  finally:
    sys.argv = saved_argv
  try:
    execution = profile.last_execution(args.device)
  except LookupError as e:
    print(f"jax-trn: {args.script} ran nothing on trn: {e}", file=sys.stderr)
    return 1
  print(execution.report(top=args.top))
  if args.html:
    execution.to_html(args.html)
    print(f"wrote {args.html}")
  return 0


def main(argv: list[str] | None = None) -> int:
  from jax_trn import _libraries
  problem = _libraries.missing()
  if problem is not None:
    print(f"jax-trn: {problem}", file=sys.stderr)
    return 2
  parser = argparse.ArgumentParser(prog="jax-trn", description=__doc__.splitlines()[0])
  commands = parser.add_subparsers(dest="command", required=True)
  commands.add_parser("info", help="configuration and hardware figures").set_defaults(run=_info)
  compile_parser = commands.add_parser("compile", help="compile StableHLO text to a program")
  compile_parser.add_argument("source")
  compile_parser.add_argument("-o", "--output", required=True)
  compile_parser.add_argument("--target", default="trn2", choices=("trn1", "trn2", "trn3"))
  compile_parser.add_argument("--lnc", type=int, choices=(1, 2),
                              help="physical cores of the device (default: the generation's LNC)")
  compile_parser.set_defaults(run=_compile)
  disasm_parser = commands.add_parser("disasm", help="disassemble a program")
  disasm_parser.add_argument("program")
  disasm_parser.set_defaults(run=_disasm)
  coverage_parser = commands.add_parser("coverage", help="the op coverage report")
  from hlo_lowering.coverage import add_arguments
  add_arguments(coverage_parser)
  coverage_parser.set_defaults(run=_coverage)
  profile_parser = commands.add_parser(
      "profile", help="run a Python script with the timeline recorded; report its last execution")
  profile_parser.add_argument("--html", help="also write the HTML report here")
  profile_parser.add_argument("--device", type=int, default=0, help="trn device id (default 0)")
  profile_parser.add_argument("--top", type=int, default=10, help="ops and lines to list")
  profile_parser.add_argument("script")
  profile_parser.add_argument("args", nargs=argparse.REMAINDER)
  profile_parser.set_defaults(run=_profile)
  args = parser.parse_args(argv)
  return args.run(args)


if __name__ == "__main__":
  sys.exit(main())
