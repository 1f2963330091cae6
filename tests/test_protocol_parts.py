"""Every registered protocol owns every part of itself, in its own folder.

For each protocol :func:`inventory` lists what it contributes -- grammar, tables, events,
codec on the sans-IO base, capture observer, display-filter fields, analyses, its part
of ``nsqviz messages/connections/stats`` (report), doctor rules, Wireshark dissector --
and the module each part is defined in; the tests fail
when a part is missing or lives outside ``nsqviz/<name>/``, when an analysis reads
another protocol's rows, and when a part of nsqviz that must know no protocol (capture
decoding, records, filters, palette, the analyses engines, the Wireshark generator ...)
imports one. ``pytest -s`` prints the inventory.
"""

from __future__ import annotations

import ast
import glob
import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from nsqviz import protocols, sansio
from nsqviz.pipeline.definitions import definitions, reads
from nsqviz.protocols.items import ObservedConnection
from nsqviz.protocols.protocol import Protocol
from nsqviz.sql import ANSWER_PAIRS, SHARED, frames_of

ROOT = Path(__file__).resolve().parent.parent / "nsqviz"
PROTOCOLS = protocols.registered()

PROTOCOL_FREE = [
    "nsqviz.protocols", "nsqviz.sansio", "nsqviz.sql", "nsqviz.records", "nsqviz.palette",
    "nsqviz.fields", "nsqviz.layout", "nsqviz.compactjson",
    "nsqviz.capture.decode", "nsqviz.capture.units", "nsqviz.capture.flowstate",
    "nsqviz.capture.checks", "nsqviz.capture.analyses",
    "nsqviz.capture.replay", "nsqviz.capture.driver", "nsqviz.capture.tcp",
    "nsqviz.pipeline.definitions", "nsqviz.pipeline.on_duckdb", "nsqviz.pipeline.analyses",
    "nsqviz.pipeline.decode", "nsqviz.pipeline.frames",
    "nsqviz.wireshark.generate", "nsqviz.wireshark.cli", "nsqviz.wireshark.lua",
    "nsqviz.wireshark.tshark",
    "nsqviz.analysis.capture", "nsqviz.analysis.cli", "nsqviz.analysis.stats",
    "nsqviz.report",
    "nsqviz.widgets.sequence", "nsqviz.widgets.hexview", "nsqviz.widgets.replay",
]
"""Modules that find every protocol through the registry and may name none."""


def _modules(package: str) -> list[Any]:
    """The package and every module below it, imported."""
    root = importlib.import_module(package)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        found.append(importlib.import_module(info.name))
    return found


def _defined_in(value: Any, package: str) -> str | None:
    """The module of ``package`` that holds ``value`` at module level, or ``None``."""
    for module in _modules(package):
        if any(v is value for v in vars(module).values()):
            return module.__name__
    return None


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def inventory(proto: Protocol) -> dict[str, list[str]]:
    """``{part: [where it is defined ...]}`` for one protocol."""
    package = proto.package
    observer = proto.observer(midstream=False)
    codec = observer.codec if isinstance(observer, ObservedConnection) else observer
    parts: dict[str, list[str]] = {
        "protocol": [type(proto).__module__],
        "grammar": [_defined_in(g, package) or f"outside ({g!r:.40})" for g in proto.grammars()],
        "observer": [type(codec).__module__],
        "codec": [type(codec.server).__module__, type(codec.client).__module__]
        if isinstance(codec, sansio.Observer) else [],
        "filter fields": [_defined_in(proto.filter_fields, package) or "outside"]
        if proto.filter_fields else [],
        "analyses": [_defined_in(proto.analyses, package) or "outside"]
        if proto.analyses.views else [],
        "report": [type(proto.report).__module__] if proto.report is not None else [],
        "rules": [f"{package}.rules"
                  if proto.rules == importlib.import_module(f"{package}.rules").RULES
                  else "outside"],
        "dissector": [],
    }
    if proto.dissector is not None:
        # a LuaScript names the module that writes it; another dissector is its class
        script = getattr(proto.dissector, "script", type(proto.dissector).__module__)
        folder = ROOT.joinpath(*script.split(".")[1:-1])
        parts["dissector"] += [script, f"{script.rpartition('.')[0]}/engine.lua"
                               if (folder / "engine.lua").is_file() else "no engine.lua"]
    return parts


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_every_part_is_there_and_in_its_own_folder(proto):
    parts = inventory(proto)
    print(f"\n{proto.title} ({proto.package}):")
    for part, where in parts.items():
        print(f"  {part:<14} {', '.join(where) or '-'}")
    missing = [part for part, where in parts.items() if not where]
    assert not missing, f"{proto.name} lacks {missing}"
    outside = {part: where for part, where in parts.items()
               if not all(_inside(w.split("/")[0], proto.package) for w in where)}
    assert not outside, f"{proto.name}'s parts outside {proto.package}: {outside}"


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_the_codec_stands_on_the_sansio_base(proto):
    codec = proto.observer(midstream=False)
    assert isinstance(codec, ObservedConnection)
    assert isinstance(codec.codec, sansio.Observer)
    for role in (codec.codec.server, codec.codec.client):
        assert isinstance(role, sansio.Connection)
        assert type(role).__name__ in ("ServerConnection", "ClientConnection")


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_each_analysis_reads_its_own_protocols_rows_only(proto):
    mine = {v.name for v in proto.analyses.views}
    others = {v.name for p in PROTOCOLS if p is not proto for v in p.analyses.views}
    for view in proto.analyses.views:  # a shared table built from the hooks (SHARED) aside
        read = reads(view.name)
        assert "frames" not in read, f"{view.name} reads every protocol's frames"
        assert not read & others, f"{view.name} reads {read & others}"
        assert read <= mine | SHARED | {frames_of(proto.name), ANSWER_PAIRS}, \
            f"{view.name} reads {read - mine}"
    for hook in (proto.analyses.connections, proto.analyses.publishes, proto.analyses.held):
        if hook is not None:
            assert hook.view in mine
    assert all(name in definitions() for name in mine)


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_its_display_filter_fields_are_its_own(proto):
    assert proto.filter_fields
    assert all(f.abbrev.startswith(proto.name + ".") for f in proto.filter_fields)


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.name)
def test_its_dissector_is_generated_from_its_folder(proto):
    assert proto.dissector is not None
    files = proto.dissector.files(proto)
    assert next(iter(files)) == f"{proto.name}.lua"
    assert "GENERATED" in files[f"{proto.name}.lua"]


def _imports(module: str) -> set[str]:
    path = Path(inspect.getfile(importlib.import_module(module)))
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


@pytest.mark.parametrize("module", PROTOCOL_FREE)
def test_protocol_free_parts_import_no_protocol(module):
    packages = [p.package for p in PROTOCOLS]
    named = {i for i in _imports(module) for pkg in packages if _inside(i, pkg)}
    assert not named, f"{module} imports {sorted(named)}: find it through nsqviz.protocols"


def test_the_finder_sees_a_part_outside():
    from nsqviz.nsq import grammar

    assert _defined_in(grammar.Command, "nsqviz.nsq") == "nsqviz.nsq.grammar"
    assert _defined_in(grammar.Command, "nsqviz.tubemq") is None
    assert "nsqviz.nsq.events" in _imports("nsqviz.nsq.connection")


def test_every_file_beside_the_modules_is_package_data():
    """A protocol's data files (its dissector's Lua, TubeMQ's .proto sources) are found
    in its folder by the package-data patterns every package shares: a file under
    nsqviz/ that no pattern takes would be missing from an installed nsqviz."""
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    taken: set[Path] = set()
    for init in ROOT.rglob("__init__.py"):
        folder = init.parent
        package = ".".join(folder.relative_to(ROOT.parent).parts)
        for pattern in [*patterns.get("*", []), *patterns.get(package, [])]:
            taken |= {folder / f for f in glob.glob(pattern, root_dir=folder,
                                                     recursive=True)}
    files = {f for f in ROOT.rglob("*") if f.is_file() and f.suffix not in (".py", ".pyc")
             and "__pycache__" not in f.parts}
    assert files, "no data file found"
    assert not files - taken, sorted(str(f.relative_to(ROOT)) for f in files - taken)
