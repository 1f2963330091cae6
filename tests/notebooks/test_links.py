"""Every relative link and image of every notebook opens in JupyterLab, whatever its root.

``make lab`` serves ``notebooks/`` (nothing above it is reachable), Binder serves the
repository. For both roots a real Jupyter server is started on a free port, and every
relative link and image of every notebook -- in its Markdown cells and in its stored
HTML/Markdown outputs -- is resolved against the notebook's path and requested as
JupyterLab requests it: an image from its download URL (``/files/<path>``, served by
tornado, which refuses symbolic links out of the root), a link through the contents API
(``/api/contents/<path>``: JupyterLab opens a linked notebook or Markdown file in a tab of
its own). None may be missing. The site's side (the same links on the built pages) is
``tests/docs/test_site.py::test_every_internal_link_and_anchor_resolves``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest

from tests._jupyter import lab_server

pytestmark = pytest.mark.slow  # a Jupyter server per root

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

_MARKDOWN_LINK = re.compile(r"(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"""(href|src)\s*=\s*["']([^"']+)["']""")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)  # code is shown, never followed


def relative_links(notebook: Path) -> list[tuple[str, str]]:
    """The notebook's relative link and image targets (no URL with a scheme, no anchor
    of the page itself) as ``("image" | "link", target)``, in order of appearance."""
    found: list[tuple[str, str]] = []
    for cell in json.loads(notebook.read_text())["cells"]:
        texts = [_CODE.sub("", "".join(cell["source"]))] \
            if cell["cell_type"] == "markdown" else []
        for out in cell.get("outputs", []):
            for kind, value in out.get("data", {}).items():
                if kind in ("text/html", "text/markdown"):
                    text = "".join(value) if isinstance(value, list) else value
                    texts.append(_CODE.sub("", text) if kind == "text/markdown" else text)
        for text in texts:
            for pattern in (_MARKDOWN_LINK, _HTML_LINK):
                found += [("image" if how in ("!", "src") else "link", u)
                          for how, u in pattern.findall(text)
                          if not urlsplit(u).scheme and not u.startswith(("#", "//"))]
    return found


def test_the_notebooks_have_relative_links_to_check():
    """The check below is not empty: the course links its notebooks, the sample
    captures' page and the Wireshark screenshot."""
    links = {u for nb in NOTEBOOKS for u in relative_links(nb)}
    assert {("link", "sample-captures.md"), ("image", "images/wireshark.png"),
            ("link", "02-live-session.ipynb")} <= links


@pytest.mark.parametrize("root", ["notebooks", "repository"])
def test_every_notebook_link_and_image_opens_in_jupyter(tmp_path, root):
    pytest.importorskip("jupyter_server", reason="jupyter_server is not installed")
    served = ROOT / "notebooks" if root == "notebooks" else ROOT
    missing, checked = [], 0
    with lab_server(tmp_path, served, app="jupyter_server") as (url, token):
        for notebook in NOTEBOOKS:
            where = quote(notebook.relative_to(served).as_posix())
            for kind, link in relative_links(notebook):
                api = "files" if kind == "image" else "api/contents"
                target = urljoin(f"{url}/{api}/{where}", urlsplit(link).path)
                request = urllib.request.Request(
                    target, headers={"Authorization": f"token {token}"})
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        ok = answer.status == 200 and bool(answer.read(1))
                except urllib.error.HTTPError as exc:
                    ok = False
                    link = f"{link} ({exc.code})"
                checked += 1
                if not ok:
                    missing.append(f"{notebook.name}: {link}")
    assert not missing, missing
    assert checked >= len(NOTEBOOKS)
