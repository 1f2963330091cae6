"""No import cycle in nsqviz: neither between two files nor between two packages.

The imports are read from the source (AST), every one of them: at module level, inside
functions and under ``if TYPE_CHECKING`` -- a lazy or type-only import that closes a
loop is still two parts that know each other, which is what the layout forbids. A
"package" is a first-level part of nsqviz (``nsqviz.capture``, ``nsqviz.records``); in the
folders that group parts by role (:data:`ROLES`: ``nsqviz.servers``, ``nsqviz.clients``,
``nsqviz.teaching``) each part is a package too (``nsqviz.servers.nsqd``,
``nsqviz.clients.session``), so two servers may not know each other in a loop either,
while the role folder as a whole is held to the first-level rule. ``nsqviz`` itself --
``nsqviz/__init__.py``, the public facade, which imports parts of nsqviz
(``nsqviz.open``) -- is a package too: a part that imports the facade and is imported by
it closes a loop like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "nsqviz"
ROLES = ("servers", "clients", "teaching")
"""The folders of nsqviz that hold parts side by side by role."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(name: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    """The nsqviz modules ``name`` imports (a submodule when one is named, else the package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield f"{target}.{alias.name}"
                elif target in modules:
                    yield target


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_targets(name, path, modules)) - {name}
            for name, path in modules.items()}


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _part(module: str) -> str:
    """The package, or inside a role folder the part (``nsqviz.servers.nsqd``)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] in ROLES else parts[:2])


def _explain(cycle: list[str], graph: Mapping[str, set[str]], unit=lambda m: m) -> str:
    members = set(cycle)
    edges = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                   if unit(m) in members and unit(t) in members and unit(m) != unit(t))
    return f"{' <-> '.join(cycle)}: " + "; ".join(edges)


def test_the_walker_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_walker_reads_every_kind_of_import() -> None:
    graph = import_graph()
    assert "nsqviz.nsq.events" in graph["nsqviz.nsq.connection"]
    assert len(graph) > 100


def test_no_cycle_between_files() -> None:
    graph = import_graph()
    cycles = _cycles(graph)
    assert not cycles, "\n".join(_explain(c, graph) for c in cycles)


def _units(graph: Mapping[str, set[str]], unit) -> dict[str, set[str]]:
    """Which unit (package, part) imports which; the facade ``nsqviz`` is one."""
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        units.setdefault(unit(module), set()).update(unit(t) for t in targets)
    for name, targets in units.items():
        targets.discard(name)
    return units


def test_the_facade_counts_as_a_package() -> None:
    """A part importing ``nsqviz`` (for its ``__file__``, say) while the facade imports
    that part is a loop."""
    graph = {"nsqviz": {"nsqviz.analysis.capture"},
             "nsqviz.analysis.capture": {"nsqviz.pipeline.ship"},
             "nsqviz.pipeline.ship": {"nsqviz"}}
    assert _cycles(_units(graph, _package)) == [["nsqviz", "nsqviz.analysis",
                                                 "nsqviz.pipeline"]]


def test_the_role_folders_hold_their_parts() -> None:
    units = _units(import_graph(), _part)
    for role in ROLES:
        assert (ROOT / role / "__init__.py").exists()
    assert {"nsqviz.servers.nsqd", "nsqviz.servers.nsqlookupd", "nsqviz.servers.tubemq",
            "nsqviz.clients.nsq", "nsqviz.clients.tubemq", "nsqviz.clients.session",
            "nsqviz.teaching.course"} <= set(units)


def test_no_cycle_between_packages() -> None:
    graph = import_graph()
    cycles = _cycles(_units(graph, _package))
    assert not cycles, "\n".join(_explain(c, graph, _package) for c in cycles)


def test_no_cycle_between_the_parts_of_a_role() -> None:
    graph = import_graph()
    cycles = _cycles(_units(graph, _part))
    assert not cycles, "\n".join(_explain(c, graph, _part) for c in cycles)
