"""The site's own Sphinx parts: the API reference of a package's every public name, the
reference of every registered protocol (each protocol's own package and what it
contributes, read from :mod:`nsqviz.protocols`), the columns of every table
``nsqviz.open`` gives, the CLI reference read from
``nsqviz.cli``'s parsers, and a Binder launch link on every notebook page.

The CLI reference is generated rather than written so that a sub-command a part
registers later (``register(subparsers)`` in its ``cli`` module) appears on the site
without an edit here, with the same usage, choices, defaults and help ``--help`` prints.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import types
from urllib.parse import quote

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

NOTEBOOKS = "notebooks/"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The (name, parser) of each sub-command, in the order ``--help`` lists them."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def _options(parser: argparse.ArgumentParser) -> list[nodes.Node]:
    """Each argument group as a rubric and a definition list: the option strings (with
    their metavar) as ``--help`` writes them, then the help with ``%(default)s`` filled."""
    formatter = parser._get_formatter()
    out: list[nodes.Node] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS
                   and not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        out.append(nodes.rubric(text=group.title or "arguments"))
        items = nodes.definition_list()
        for action in actions:
            term = nodes.term()
            term += nodes.literal(text=formatter._format_action_invocation(action))
            body = nodes.definition()
            body += nodes.paragraph(text=formatter._expand_help(action) if action.help else "")
            items += nodes.definition_list_item("", term, body)
        out.append(items)
    return out


class CliDirective(SphinxDirective):
    """``{nsqviz-cli}``: one section per sub-command of ``nsqviz`` (and of theirs)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nsqviz.cli import build_parser

        parser = build_parser()
        return [self._section(f"nsqviz {name}", sub) for name, sub in _subcommands(parser)]

    def _section(self, title: str, parser: argparse.ArgumentParser) -> nodes.section:
        section = nodes.section(ids=[nodes.make_id(title)],
                                names=[nodes.fully_normalize_name(title)])
        section += nodes.title(text=title)
        if parser.description:
            for para in parser.description.strip().split("\n\n"):
                section += nodes.paragraph(text=" ".join(para.split()))
        usage = parser.format_usage().removeprefix("usage: ").strip()
        section += nodes.literal_block(usage, usage, language="none")
        section.extend(_options(parser))
        if parser.epilog:
            section += nodes.literal_block(parser.epilog, parser.epilog, language="none")
        for name, sub in _subcommands(parser):
            section += self._section(f"{title} {name}", sub)
        return section


def _is_data(value: object) -> bool:
    return not (inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value))


def _comment(name: str, value: object) -> list[str]:
    """The ``#:`` comment (or string under the assignment) of ``name`` in the module of
    the project that defines it -- the one holding ``value`` under that name and
    documenting it there."""
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith("nsqviz") or vars(module).get(name, _is_data) is not value:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", name) in docs:
            return list(docs["", name])
    return []


def _api(package: str) -> list[str]:
    """``package``'s automodule, plus its tables and constants (see :class:`ApiDirective`),
    as reStructuredText lines."""
    module = importlib.import_module(package)
    lines = [f".. automodule:: {package}", ""]
    names = list(getattr(module, "__all__", ()))
    for name in names:
        value = getattr(module, name)
        if name not in vars(module) and not _is_data(value):  # a lazy __getattr__'s
            auto = "autoclass" if inspect.isclass(value) else "autofunction"
            lines += [f".. {auto}:: {package}.{name}", ""]
    data = [name for name in names
            if _is_data(getattr(module, name)) and name not in _assigned(package)]
    if data:
        lines += [".. rubric:: Tables and constants", ""]
    for name in data:
        value = getattr(module, name)
        lines += [f".. py:data:: {name}", f"   :module: {package}"]
        if isinstance(value, types.UnionType):
            lines.append(f"   :value: {value!r}")
        else:
            kind = type(value)
            where = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
            lines.append(f"   :type: {where}{kind.__qualname__}")
        lines += [""] + [f"   {line}" for line in _comment(name, value)] + [""]
    return lines


def _parsed(directive: SphinxDirective, lines: list[str], source: str) -> list[nodes.Node]:
    holder = nodes.section()
    nested_parse_with_titles(directive.state, StringList(lines, source=source), holder)
    return list(holder.children)


class ApiDirective(SphinxDirective):
    """``.. nsqviz-api:: package``: the package's automodule, plus its tables and
    constants.

    autodoc alone would silently leave out two kinds of public names: data a package
    imports from the module defining it (``COMMANDS``, ``TRANSITIONS``, ...: autodoc
    documents data only where it is assigned), written here as ``py:data`` entries under
    the package's name with the comment their own module gives them; and names a
    package hands out through a module ``__getattr__`` (imported on first use, so
    absent from the module until then), written as their own ``autoclass`` or
    ``autofunction``. Used inside ``eval-rst``: what it writes is reStructuredText.
    """

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        package = self.arguments[0]
        return _parsed(self, _api(package), f"<nsqviz-api {package}>")


class ProtocolsDirective(SphinxDirective):
    """``.. nsqviz-protocols::``: every registered protocol, in registration order
    (:func:`nsqviz.protocols.registered`): what it contributes -- its analyses' tables,
    its part of ``nsqviz messages/connections/stats``, its display-filter fields, its
    Wireshark dissector, its doctor rules -- and its package's API (as ``nsqviz-api``).
    A protocol registered later has its section without an edit of the site."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nsqviz import protocols

        lines: list[str] = []
        for proto in protocols.registered():
            mine = proto.analyses
            tables = ", ".join(f"``{v.name}``" for v in mine.views if not v.step) or "none"
            shared = [name for name, hook in (("connections", mine.connections),
                                              ("errors", mine.errors)) if hook is not None]
            lines += [f".. rubric:: ``{proto.package}``: {proto.title}", "",
                      f"* analyses: {tables}" + (f"; its part of {' and '.join(shared)}"
                                                 if shared else ""),
                      f"* ``nsqviz messages``, ``connections``, ``stats``: {_gives(proto)}",
                      f"* display-filter fields: {len(proto.filter_fields)} "
                      f"(``{proto.name}.*``; ``nsqviz fields`` lists them)",
                      "* Wireshark dissector: "
                      + (f"``{proto.name}.lua``" if proto.dissector else "none"),
                      f"* doctor rules: {len(proto.rules)}", ""]
            lines += _api(proto.package)
        return _parsed(self, lines, "<nsqviz-protocols>")


def _gives(proto: object) -> str:
    """What a protocol's report (:mod:`nsqviz.report`) adds to the three commands."""
    from nsqviz.report import Report

    report = getattr(proto, "report", None)
    if report is None:
        return "nothing of its own"
    parts = [what for method, what in (("messages", "its messages"),
                                       ("connections", "its connections' lines"),
                                       ("stats", "its statistics"))
             if getattr(type(report), method) is not getattr(Report, method)]
    return ", ".join(parts) or "nothing of its own"


class TablesDirective(SphinxDirective):
    """``.. nsqviz-tables::``: each table of ``nsqviz.open``'s
    :class:`~nsqviz.analysis.capture.Capture`, what its rows are (an analysis's
    definition says it; the frames table's attribute) and its columns with their Arrow
    types, read from
    :func:`~nsqviz.analysis.capture.table_schemas` -- the frames table's schema and what
    each analysis's SQL makes -- so the page follows the definitions unedited. Used
    inside ``eval-rst``: what it writes is reStructuredText."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from nsqviz.analysis.capture import Capture, table_schemas
        from nsqviz.pipeline.definitions import definitions

        lines: list[str] = []
        for name, schema in table_schemas().items():
            view = definitions().get(name)
            about = view.doc if view is not None and view.doc else \
                (inspect.getdoc(getattr(Capture, name)) or "").split("\n\n")[0]
            lines += [f".. rubric:: cap.{name}", f"   :name: table-{name.replace('_', '-')}", "",
                      " ".join(about.split()), "", ".. list-table::", "   :header-rows: 1",
                      "   :widths: auto", "", "   * - column", "     - type"]
            for field in schema:
                lines += [f"   * - ``{field.name}``", f"     - {field.type}"]
            lines.append("")
        return _parsed(self, lines, "<nsqviz-tables>")


def _assigned(package: str) -> set[str]:
    """The names the package's own source assigns with a doc comment: autodoc documents
    those itself (it takes a module's data only from there)."""
    try:
        return {name for _, name in ModuleAnalyzer.for_module(package).find_attr_docs()}
    except PycodeError:
        return set()


def _binder_link(app: Sphinx, doctree: nodes.document) -> None:
    """Under a notebook page's title: open this notebook on Binder, in JupyterLab."""
    docname = app.env.docname
    if not docname.startswith(NOTEBOOKS):
        return
    config = app.config
    url = (f"https://mybinder.org/v2/gh/{config.nsqviz_binder_repo}/"
           f"{config.nsqviz_binder_ref}?labpath={quote(docname + '.ipynb')}")
    link = nodes.reference("", "Run this notebook on Binder", refuri=url)
    para = nodes.paragraph("", "", link, classes=["nsqviz-binder"])
    section = doctree.next_node(nodes.section)
    if section is None:
        doctree.insert(0, para)
    else:
        section.insert(1, para)  # after the title


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("nsqviz_binder_repo", "", "html", types=[str])
    app.add_config_value("nsqviz_binder_ref", "HEAD", "html", types=[str])
    app.add_directive("nsqviz-api", ApiDirective)
    app.add_directive("nsqviz-protocols", ProtocolsDirective)
    app.add_directive("nsqviz-cli", CliDirective)
    app.add_directive("nsqviz-tables", TablesDirective)
    app.connect("doctree-read", _binder_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
