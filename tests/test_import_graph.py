"""The layering, checked statically (imports parsed with ast, function-level ones included):
the compiler (hlo_lowering) imports nothing from the plugin (jax_trn), the import graph of the two
packages has no circle, and private JAX imports (`jax._src`) live in two modules only. Then
dynamically: the compiler compiles in a process where jax_trn cannot be imported."""

import ast
import json
import pathlib

from fresh_process import run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("hlo_lowering", "jax_trn")
EXTENSIONS = {"jax_trn._native"}  # compiled modules: no source to parse
PRIVATE_JAX_MODULES = {"hlo_lowering/jaxlib_private.py", "jax_trn/_jax_private.py"}


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
  """module name -> (source file, is a package)."""
  modules = {}
  for package in PACKAGES:
    for path in (ROOT / package).rglob("*.py"):
      parts = list(path.relative_to(ROOT).with_suffix("").parts)
      is_package = parts[-1] == "__init__"
      modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
  return modules


def _imported_names(name: str, path: pathlib.Path, is_package: bool, known) -> set[str]:
  """Every module `name` imports anywhere in its file (relative imports resolved)."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      module = node.module or ""
      if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        module = ".".join(base + ([module] if module else []))
      for alias in node.names:  # `from pkg import submodule` imports the submodule
        submodule = f"{module}.{alias.name}"
        names.add(submodule if submodule in known else module)
  return names


def _graph() -> dict[str, set[str]]:
  """module -> the project modules importing it runs: the imported module and each package above
  it that is not above the importer (those are initialised already)."""
  modules = _modules()
  known = set(modules) | EXTENSIONS
  graph = {}
  for name, (path, is_package) in modules.items():
    own = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
    edges = set()
    for imported in _imported_names(name, path, is_package, known):
      while imported and imported not in known:
        imported = imported.rpartition(".")[0]
      parts = imported.split(".") if imported else []
      for k in range(1, len(parts) + 1):
        target = ".".join(parts[:k])
        if target in modules and target != name and target not in own:
          edges.add(target)
    graph[name] = edges
  return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components with more than one module (Tarjan)."""
  index, low, stack, on_stack, circles = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while not component or component[-1] != v:
        component.append(stack.pop())
        on_stack.discard(component[-1])
      if len(component) > 1:
        circles.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return circles


def test_the_compiler_imports_nothing_from_jax_trn():
  offenders = {name: sorted(t for t in targets if t.split(".")[0] == "jax_trn")
               for name, targets in _graph().items() if name.startswith("hlo_lowering")}
  assert not {k: v for k, v in offenders.items() if v}


def test_the_import_graph_has_no_circle():
  graph = _graph()
  assert graph["jax_trn.compilation"] >= {"hlo_lowering.compiler"}  # the graph sees imports
  assert _circles(graph) == []


def test_a_circle_would_be_found():
  assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_private_jax_imports_live_in_two_modules():
  """Only the shipped code and its examples: tests may use JAX internals as test tools."""
  found = set()
  for folder in (*PACKAGES, "benchmarks", "examples"):
    for path in (ROOT / folder).rglob("*.py"):
      if "jax._src" in path.read_text():
        found.add(path.relative_to(ROOT).as_posix())
  assert found == PRIVATE_JAX_MODULES


_PURE_COMPILE = """
import json, sys
sys.modules["jax_trn"] = None  # any import of the plugin package fails
from hlo_lowering import compiler
from hlo_lowering.program import read_program
target = json.loads({target!r})
text = b"func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {{ %0 = stablehlo.add %a, %a : tensor<4xf32> return %0 : tensor<4xf32> }}"
program, report = compiler.compile_program(text, "mlir", compiler.CompileOptions(), target)
print(json.dumps({{"target": read_program(program).target, "summary": report.summary(),
                  "plugin_imported": sys.modules.get("jax_trn") is not None}}))
"""


def test_the_compiler_compiles_without_the_plugin_package():
  from jax_trn import _native
  target = json.dumps(_native.target_spec("trn1"))
  result = run_python(_PURE_COMPILE.format(target=target), {"PYTHONPATH": str(ROOT)})
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out == {"target": "trn1", "summary": {"stablehlo.add": {"native": 1}},
                 "plugin_imported": False}
