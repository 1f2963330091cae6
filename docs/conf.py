"""Sphinx configuration of the nsqviz website, built by ``make docs`` (``scripts/docs.sh``).

Why Sphinx with MyST-NB (and not Jupyter Book, nbsphinx or mkdocs): it is pure Python,
installed from PyPI into ``.venv`` like everything else (no Node, no pandoc), it builds
offline, it renders the notebooks' *stored* outputs without a kernel
(``nb_execution_mode = "off"``) -- the nsqviz pictures are self-contained HTML and CSS,
so their bytes, tree rows and frame boxes respond to clicks without running anything --,
and autodoc reads the same docstrings the code carries, so the API reference cannot
drift from the code. Furo is the theme because it has a light and a dark theme (and
follows the reader's system setting) and fetches no web font or script from anywhere.

The source directory is the repository itself (``sphinx-build -c docs .``), limited by
``include_patterns`` to ``docs/``, ``notebooks/`` and ``data/README.md``: the notebooks
and the data description are built where they live, so their links to each other
(``02-live-session.ipynb``) resolve on the site exactly as they do in the repository,
with no copy to keep in step. JupyterLab serves nothing above its root, which ``make
lab`` sets to ``notebooks/`` (Binder: the repository), so whatever a notebook links to
or shows is inside ``notebooks/``: its pictures in ``notebooks/images/``, and the sample
captures' description (``data/README.md``, kept beside the captures) through the
symbolic link ``notebooks/sample-captures.md`` -- JupyterLab opens it through its
contents API, which follows the link, and Sphinx resolves the link to the page of the
file it points to.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "nsqviz"
author = "the nsqviz team"
copyright = "the nsqviz team"  # noqa: A001 -- Sphinx's name for it

extensions = [
    "myst_nb",  # Markdown pages and the notebooks (MyST-NB brings myst_parser)
    "sphinx.ext.autodoc",
    "nsqviz_docs",  # the CLI reference from nsqviz.cli's parsers, Binder links
    "nsqviz_rules",  # the doctor's rules from their definitions, examples from data/doctor
]

root_doc = "docs/index"
include_patterns = ["docs/**", "notebooks/*.ipynb", "data/README.md"]
exclude_patterns = [
    ".*", "build", "docs/_ext", "docs/_root", "docs/*.txt", "**/.ipynb_checkpoints",
]

# The notebooks are never run here: what a reader sees is what nbval checked.
nb_execution_mode = "off"
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# Heading levels that skip one (H1 then H3) are allowed: notebook 01's "Your path through
# the notebooks" and data/README.md's sections do it, and the page reads fine.
suppress_warnings = ["myst.header"]

# every public name, documented or not; a table's value is the code, not the page's
autodoc_default_options = {
    "members": True, "undoc-members": True, "show-inheritance": True, "no-value": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autoclass_content = "both"

html_theme = "furo"
html_title = "nsqviz"
html_static_path = ["_static"]
html_css_files = ["nsqviz-site.css"]
html_extra_path = ["_root"]  # index.html at the site's root: a redirect to docs/index.html
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
# section titles rank above API names of the same word (the file says why)
html_search_scorer = str(DOCS / "search_scorer.js")

# Binder opens a notebook page's own notebook in JupyterLab (nsqviz_docs adds the link).
nsqviz_binder_repo = "nsqviz/nsqviz"
nsqviz_binder_ref = "HEAD"
