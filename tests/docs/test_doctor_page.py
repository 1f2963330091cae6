"""The site's page of the capture doctor's rules in a real headless Chromium: every
registered rule has its section -- what it finds, its severity, why it matters, what to
change, its thresholds with their reasons, an example finding from its real capture in
data/doctor/ and its SQL -- and the example is what the doctor says about that capture
(computed when the site was built, not typed)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from nsqviz.doctor.rule import Severity
from nsqviz.pipeline.definitions import rules
from tests.docs import test_site_browser
from tests.docs.conftest import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

served = test_site_browser.served  # the built site, served, and the browser reading it
browser = test_site_browser.browser


def _extension() -> Any:
    """The site's extension that writes the page (docs/_ext is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "nsqviz_rules", ROOT / "docs" / "_ext" / "nsqviz_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def examples() -> Iterator[Future[dict[str, Any]]]:
    """Each rule's example as the doctor finds it now, worked out in a thread while the
    site builds (it builds in another process: this one would only wait for it). Asked
    for before the site, so session-scoped as the site is."""
    example = _extension().example
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(lambda: {rule_id: example(rule_id) for rule_id in rules()})


def test_the_rules_page_documents_every_registered_rule(
        examples: Future[dict[str, Any]], served: str, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{served}/docs/doctor.html")
        registered = rules()
        sections = page.locator("article section.nsqviz-rule")
        ids = [sections.nth(k).locator("h2, h3").first.inner_text().rstrip("¶").strip()
               for k in range(sections.count())]
        assert ids == list(registered), ids
        for rule_id, rule in registered.items():
            section = page.locator(f"section#rule-{rule_id.replace('.', '-')}")
            section.scroll_into_view_if_needed()
            assert section.is_visible(), rule_id
            text = section.inner_text()
            for part in ("What it finds:", "Severity:", "Why it matters:", "What to change:",
                         "Its definition"):
                assert part in text, (rule_id, part)
            assert Severity(rule.severity).value in text
            for threshold in rule.thresholds:
                assert str(threshold) in text, (rule_id, threshold.name)
            assert "--" not in rule.change or "--" in text  # flags as written, no dashes
            found = examples.result()[rule_id]
            assert found is not None, f"{rule_id}: no example in its captures"
            name, finding = found
            assert f"data/{name}" in text and finding["summary"] in text, rule_id
            rows = section.locator("table.nsqviz-evidence tbody tr")
            assert rows.count() == min(len(finding["evidence"]), 8), rule_id
            assert section.locator("pre").first.is_visible()  # its SQL
    finally:
        page.close()
