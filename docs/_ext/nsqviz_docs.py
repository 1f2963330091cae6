"""The site's own Sphinx parts: the CLI reference read from ``nsqviz.cli``'s parsers,
and a Binder launch link on every notebook page.

The CLI reference is generated rather than written so that a sub-command a part
registers later (``register(subparsers)`` in its ``cli`` module) appears on the site
without an edit here, with the same usage, choices, defaults and help ``--help`` prints.
"""

from __future__ import annotations

import argparse
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

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
    app.add_directive("nsqviz-cli", CliDirective)
    app.connect("doctree-read", _binder_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
