"""The layer rule: imports go one way, down the layers, and no private name crosses modules.

The rule is written at the top of ``bayes_activeeval/__init__.py`` and ``docs/design.md``; this
table is its executable form. A new module must be added to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bayes_activeeval"

#: Layer of each top-level module or subpackage (0 = bottom). A module may import from its own
#: layer or any layer below, never from one above. A dotted key names a module inside a subpackage
#: (the longest matching key decides); once a subpackage has dotted keys, each of its modules must
#: be listed.
LAYERS = {
    # 0. NumPy/SciPy kernels: measures, beliefs, pools, the core kernel, estimators, proposals
    "_validation": 0,
    "measures": 0,
    "beliefs": 0,
    "strata": 0,
    "pool": 0,
    "kernel": 0,
    "intervals": 0,
    "estimators": 0,
    "proposals": 0,
    "lazy": 0,  # the dask-backed pool; proposals and estimators dispatch to it
    "lazy.chunks": 0,  # chunk tasks -> LazyPool -> proposals -> sources -> the package module
    "lazy.pool": 0,
    "lazy.proposal": 0,
    "lazy.sources": 0,
    "datasets": 0,
    "threshold_free": 0,
    "curves": 0,
    "unseen": 0,
    # 1. Bayesian models: beliefs about labels (oracles), posteriors of the measure
    "oracles": 1,
    "oracles.dirichlet_tree.tree": 1,  # the Dirichlet-tree oracle: tree, tilt, posterior, oracle
    "oracles.dirichlet_tree.tilt": 1,
    "oracles.dirichlet_tree.posterior": 1,
    "oracles.dirichlet_tree.oracle": 1,
    "posterior": 1,
    # 2. workflows built on the kernels and the models
    "adaptive": 2,
    "comparison": 2,
    "sequential": 2,
    "planning": 2,
    "benchmark": 2,
    "ranking": 2,
    # 3. applications: files, sessions, reports, the web page, the command line
    "io": 3,
    "session": 3,
    "session.store": 3,  # labeling sessions: store, designs, annotations, records, core
    "session.designs": 3,
    "session.annotations": 3,
    "session.records": 3,
    "session.core": 3,
    "report": 3,
    "demo": 3,
    "serve": 3,
    "cli": 3,
    "ranking_session": 3,
    "__init__": 3,
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, parts


def _imports(path: Path, parts: list[str]):
    """``(line, imported module parts, names, top_level)`` for every import of the package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = parts if path.name == "__init__.py" else parts[:-1]
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if not (node.module or "").startswith("bayes_activeeval"):
                    continue
                target = node.module.split(".")[1:]
            else:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            names = [a.name for a in node.names]
            yield node.lineno, target, names, id(node) in top
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("bayes_activeeval."):
                    yield node.lineno, a.name.split(".")[1:], [], id(node) in top


def _layer(parts: list[str]) -> int:
    if not parts:
        return LAYERS["__init__"]
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return LAYERS[key]
    pytest.fail(f"module {'.'.join(parts)!r} is not in the layer table of tests/test_layers.py")


def _is_module(parts: list[str]) -> bool:
    p = PACKAGE.joinpath(*parts)
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def test_imports_go_down_the_layers():
    bad = []
    for path, parts in _modules():
        own = _layer(parts)
        for line, target, names, _ in _imports(path, parts):
            # `from . import x` / `from .pkg import mod` import modules: judge the module itself
            targets = [[*target, n] for n in names if _is_module([*target, n])] or [target]
            for t in targets:
                if _layer(t) > own:
                    bad.append(f"{path.relative_to(PACKAGE)}:{line} imports {'.'.join(t)}")
    assert not bad, "imports against the layer rule:\n" + "\n".join(bad)


def test_no_private_name_crosses_modules():
    bad = []
    for path, parts in _modules():
        for line, _target, names, _ in _imports(path, parts):
            for n in names:
                if n.startswith("_") and not (n.startswith("__") and n.endswith("__")):
                    bad.append(f"{path.relative_to(PACKAGE)}:{line} imports {n}")
    assert not bad, "private names imported from another module:\n" + "\n".join(bad)


def test_module_level_imports_are_acyclic():
    graph: dict[str, set[str]] = {}
    for path, parts in _modules():
        me = ".".join(parts) or "__init__"
        deps = graph.setdefault(me, set())
        for _line, target, names, top in _imports(path, parts):
            if not top:
                continue
            targets = [[*target, n] for n in names if _is_module([*target, n])] or [target]
            for t in targets:
                dep = ".".join(t) or "__init__"
                if dep != me and not me.startswith(dep + "."):  # a package's own __init__
                    deps.add(dep)
    state: dict[str, int] = {}

    def visit(node, stack):
        if state.get(node) == 1:
            pytest.fail("import cycle: " + " -> ".join([*stack, node]))
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            visit(dep, [*stack, node])
        state[node] = 2

    for node in sorted(graph):
        visit(node, [])


def test_every_module_is_in_the_table():
    split = {k.rsplit(".", 1)[0] for k in LAYERS if "." in k}  # subpackages listed module by module
    for _path, parts in _modules():
        _layer(parts)
        for n in range(1, len(parts)):
            if ".".join(parts[:n]) in split:
                assert ".".join(parts) in LAYERS, (
                    f"module {'.'.join(parts)!r} is not in the layer table of tests/test_layers.py"
                )
