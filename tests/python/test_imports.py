"""The package's modules import each other as a DAG: no module imports one
that imports it back, directly or through others.

A cycle works only while each module in it happens to need nothing of the
other at import time, and breaks at the first top-level use. The graph is
read from the source with ``ast``: every ``import`` / ``from ... import``
that names a module of the package counts, at any depth (an import inside a
function runs too, on the first call), except those under
``if TYPE_CHECKING:``, which never run. An edge goes to the module named,
not to the packages above it that Python loads first.
"""
import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

from conftest import PYTHON_DIR

PACKAGE = "cco"


def _module_names(root: Path, package: str) -> Dict[str, Path]:
    """{dotted name: file} of every module of the package under root."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import statements of the tree, leaving out `if TYPE_CHECKING:` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, package: str = PACKAGE) -> Dict[str, Set[str]]:
    """{module: modules of the package it imports}."""
    modules = _module_names(root, package)
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        # The package a relative import starts from: the module's own for an
        # __init__, its parent's otherwise.
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = here.split(".")
                    base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from X import y` imports the module X.y when y is one, else
                # takes the name y from the module X.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle as [a, b, ..., a], or None when the graph is acyclic."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_package_imports_form_a_dag():
    graph = import_graph(PYTHON_DIR)
    # The graph is read at all: the package imports its modules, and _lib
    # raises the classes of errors.
    assert {"cco._lib", "cco.errors", "cco.communicator"} <= graph["cco"], graph["cco"]
    assert "cco.errors" in graph["cco._lib"], graph["cco._lib"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_errors_imports_nothing_of_the_package():
    assert import_graph(PYTHON_DIR)["cco.errors"] == set()


def test_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from . import a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg"] == {"pkg.a"}
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.c"] == set()
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]
