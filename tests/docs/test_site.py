"""``make docs``: the website builds with no warning, offline, and every link in it leads
somewhere.

The build is ``scripts/docs.sh`` (Sphinx, ``-W --keep-going``) into a temporary folder;
the checks read the HTML it wrote: each notebook's stored pictures are on its page byte
for byte, every public name of the API packages and every sub-command of ``nsqviz`` has
its entry, no page loads anything from the network, and every relative link and anchor
resolves.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.docs.conftest import ROOT, Site

pytestmark = pytest.mark.slow  # the build: ~10 s of CPU

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# the packages whose every public name (``__all__``) the API reference documents
API = ("nsqviz.nsq", "nsqviz.tubemq", "nsqviz.clients.nsq", "nsqviz.capture",
       "nsqviz.capture.replay", "nsqviz.analysis.capture", "nsqviz.servers.nsqd",
       "nsqviz.servers.nsqlookupd", "nsqviz.servers.tubemq", "nsqviz.clients.tubemq",
       "nsqviz.filters", "nsqviz.servers.embedded", "nsqviz.servers.authd",
       "nsqviz.clients.session", "nsqviz.clients.session.tubemq", "nsqviz.doctor",
       "nsqviz.analysis.findings")


def test_the_site_builds_with_no_warning(site: Site) -> None:
    assert site.returncode == 0 and not site.output.strip(), site.output[-4000:]
    print(f"site built in {site.seconds:.1f} s")


def test_every_notebook_has_its_page_with_its_stored_outputs_and_a_binder_link(
        site: Site) -> None:
    for path in NOTEBOOKS:
        page = (site.html / "notebooks" / f"{path.stem}.html").read_text()
        assert f"labpath=notebooks/{path.name}" in page, path.name
        stored = [_html(o) for c in json.loads(path.read_text())["cells"]
                  for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
        missing = [h[:80] for h in stored if h.strip() not in page]
        assert not missing, (path.name, missing)


def _html(output: dict[str, dict[str, str | list[str]]]) -> str:
    value = output["data"]["text/html"]
    return "".join(value) if isinstance(value, list) else value


def test_the_api_reference_has_every_public_name(site: Site) -> None:
    import importlib

    from sphinx.util.inventory import InventoryFile

    with (site.html / "objects.inv").open("rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    documented = {name for kind in inventory.values() for name in kind}
    missing = [f"{module}.{name}" for module in API
               for name in importlib.import_module(module).__all__
               if f"{module}.{name}" not in documented]
    assert not missing, missing


def test_nsqviz_open_and_every_table_with_its_columns_are_on_the_api_pages(
        site: Site) -> None:
    """``nsqviz.open`` has its entry, and each table a Capture gives its section listing
    the columns that table really has -- checked against the DataFrames of a sample
    capture, not against the schemas the page is made from."""
    from sphinx.util.inventory import InventoryFile

    import nsqviz
    from nsqviz.analysis.capture import Capture
    from nsqviz.pipeline.definitions import tables

    with (site.html / "objects.inv").open("rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    documented = {name for kind in inventory.values() for name in kind}
    assert {"nsqviz.open", "nsqviz.analysis.capture.Capture"} <= documented
    page = (site.html / "docs" / "api" / "capture.html").read_text()
    sections = re.split(r'id="table-', page)[1:]
    by_name = {s.split('"', 1)[0]: s for s in sections}
    cap = nsqviz.open(str(ROOT / "data" / "pubsub-pynsq.pcap"))
    assert isinstance(cap, Capture)
    for name in ["frames", *tables()]:
        section = by_name.get(name.replace("_", "-"))  # an HTML id has no underscore
        assert section is not None, f"no section for cap.{name}"
        columns = getattr(cap, name).columns
        missing = [c for c in columns if f">{c}<" not in section]
        assert not missing, (name, missing)


def test_the_cli_reference_has_every_sub_command(site: Site) -> None:
    import argparse

    from nsqviz.cli import build_parser

    page = (site.html / "docs" / "cli.html").read_text()
    action = next(a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction))
    for name, parser in action.choices.items():
        assert f'id="nsqviz-{name}"' in page, name
        for option in parser._actions:
            for flag in option.option_strings:
                assert flag in page, (name, flag)


class _Links(HTMLParser):
    """The ids a page defines, the links it follows and the assets it loads."""

    ASSETS = {"script": "src", "img": "src", "iframe": "src", "source": "src",
              "video": "src", "audio": "src", "embed": "src", "link": "href"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.assets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.ids.update(found[k] for k in ("id", "name") if k in found and tag != "meta")
        if tag in self.ASSETS and self.ASSETS[tag] in found:
            self.assets.append(found[self.ASSETS[tag]])
        if tag == "a" and "href" in found:
            self.links.append(found["href"])
        if tag == "link" and "href" in found:
            self.links.append(found["href"])


def _pages(site: Site) -> dict[Path, _Links]:
    pages = {}
    for path in site.html.rglob("*.html"):
        parsed = _Links()
        parsed.feed(path.read_text())
        pages[path] = parsed
    return pages


def _remote(url: str) -> bool:
    return url.startswith("//") or urlsplit(url).scheme not in ("", "file")


def test_nothing_is_loaded_from_the_network(site: Site) -> None:
    """No script, style sheet, font, image or frame comes from outside the site (the
    only absolute URLs are links a reader follows: Binder, the theme's credits)."""
    remote = {str(path.relative_to(site.html)): url for path, page in _pages(site).items()
              for url in page.assets if _remote(url)}
    assert not remote, remote
    css_urls = {str(css.relative_to(site.html)): found for css in site.html.rglob("*.css")
                if (found := re.findall(r"(?:url\(|@import)\s*['\"]?(?:https?:)?//[^)'\"]+",
                                        css.read_text(errors="replace")))}
    assert not css_urls, css_urls


def test_every_internal_link_and_anchor_resolves(site: Site) -> None:
    pages = _pages(site)
    broken = []
    for path, page in pages.items():
        for url in page.links + page.assets:
            if _remote(url) or url.startswith(("mailto:", "javascript:")):
                continue
            parts = urlsplit(url)
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path.relative_to(site.html)}: {url}")
            elif parts.fragment and target.suffix == ".html" and (
                    unquote(parts.fragment) not in pages[target].ids):
                broken.append(f"{path.relative_to(site.html)}: {url} (no such anchor)")
    assert not broken, broken
    assert len(pages) >= len(NOTEBOOKS) + 10, sorted(map(str, pages))


def test_the_landing_page_names_the_three_ways_and_the_two_commands(site: Site) -> None:
    text = re.sub(r"<[^>]+>", "", (site.html / "docs" / "index.html").read_text())
    for said in ("Learn the protocols in a workshop", "Debug captures",
                 "Check a client library", "make lab", "make test", "make docs"):
        assert said in text, said
    # the site's root leads there
    assert 'url=docs/index.html"' in (site.html / "index.html").read_text()
