"""The compliance site in a real browser: Debian's headless Chromium, driven by Selenium
through Debian's chromedriver. The standalone page and the built docs site load, the filters
hide and show what they say, every link of the matrix resolves, nothing an adapter or a report
supplied runs, and the page is whole with JavaScript off.

Run with ``nox -s browser`` (which needs ``apt-get install -y chromium chromium-driver``);
elsewhere, without Chromium or Selenium, these tests are skipped and say how to install them.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag

import pytest

from tests.conformance.compliance_site.fixture import EVIL, every_outcome, hostile
from xpspec.conformance.compliance_site import build_matrix, render_standalone

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARGUMENTS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Chromium offline: no update, sync or background fetches (the network refuses them)."""
HOW = (
    "install Debian's browser with `apt-get install -y chromium chromium-driver` and Selenium "
    "with `pip install -e '.[browser]'`, or run `nox -s browser`"
)
REQUIRED = os.environ.get("XPSPEC_BROWSER") == "required"
"""Set by ``nox -s browser``: there a missing browser fails the tests instead of skipping."""


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason}: {HOW}")
    pytest.skip(f"{reason}: {HOW}")


def _driver(javascript: bool = True) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("Selenium is not installed")
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        _unavailable(f"no {' and no '.join(missing)}")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='xpspec-chromium-')}")
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = _driver()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The standalone page of the fixture with every outcome, and of the hostile one."""
    folder = tmp_path_factory.mktemp("pages")
    urls = {}
    for name, doc in (("every", every_outcome()), ("hostile", hostile())):
        path = folder / f"{name}.html"
        path.write_text(render_standalone(build_matrix(doc)), encoding="utf-8")
        urls[name] = path.as_uri()
    return urls


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The docs site built from this checkout (``mkdocs build --strict``), served on the
    loopback address; its URL."""
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        _unavailable("MkDocs is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    shutil.rmtree(out, ignore_errors=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _visible_rows(driver: Any) -> list[Any]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('table.matrix tbody tr'))"
        ".filter(r => !r.hidden).map(r => [r.id, r.dataset.area, r.dataset.outcomes]);"
    )


def _set_boxes(driver: Any, name: str, keep: set[str]) -> None:
    """Click the filter boxes of ``name`` so that only those of ``keep`` are checked."""
    for box in driver.find_elements("css selector", f'form.filters input[name="{name}"]'):
        if box.is_selected() != (box.get_attribute("value") in keep):
            box.click()


def _severe(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_standalone_page_loads_and_shows_its_filters(browser: Any, pages: dict) -> None:
    browser.get(pages["every"])
    form = browser.find_element("css selector", "form.filters")
    assert form.is_displayed()  # the script ran: the policy let it in
    rows = _visible_rows(browser)
    assert len(rows) == len(every_outcome()["clauses"])
    shown = browser.find_element("css selector", "form.filters .shown").text
    assert shown == f"{len(rows)} of {len(rows)} clauses shown"
    assert _severe(browser) == []


def test_the_area_filter_keeps_the_chosen_areas(browser: Any, pages: dict) -> None:
    browser.get(pages["every"])
    _set_boxes(browser, "area", {"replay", "train"})
    rows = _visible_rows(browser)
    assert rows and {area for _, area, _ in rows} == {"replay", "train"}
    clauses = every_outcome()["clauses"]
    assert len(rows) == sum(c.split(".")[0] in ("replay", "train") for c in clauses)
    browser.find_element("css selector", "form.filters button.all").click()
    assert len(_visible_rows(browser)) == len(clauses)


def test_the_outcome_filter_keeps_rows_with_that_outcome_and_dims_the_other_cells(
    browser: Any, pages: dict
) -> None:
    browser.get(pages["every"])
    _set_boxes(browser, "outcome", {"finding", "crash"})
    rows = _visible_rows(browser)
    assert len(rows) == 2
    assert all({"finding", "crash"} & set(keys.split()) for _, _, keys in rows)
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.matrix tbody tr:not([hidden]) td'))"
        ".map(c => [c.dataset.o, c.classList.contains('dim')]);"
    )
    assert cells and all(dim == (key not in ("finding", "crash")) for key, dim in cells)


def test_each_cell_that_is_not_a_pass_opens_its_detail(browser: Any, pages: dict) -> None:
    browser.get(pages["every"])
    links = browser.find_elements("css selector", "table.matrix td a")
    hrefs = [a.get_attribute("href") for a in links]
    assert len(hrefs) == len(build_matrix(every_outcome()).details())
    for href in hrefs:
        browser.get(pages["every"])
        browser.find_element(
            "css selector", f'table.matrix td a[href="#{href.split("#")[1]}"]'
        ).click()
        target = browser.execute_script(
            "const el = document.getElementById(decodeURIComponent(location.hash.slice(1)));"
            "if (!el) return null; const r = el.getBoundingClientRect();"
            "return [el.tagName, r.top >= -1 && r.top < window.innerHeight];"
        )
        assert target == ["SECTION", True], href
        assert browser.find_element("css selector", ":target pre.repro").text.startswith(
            "xpspec trace "
        )


def test_nothing_an_adapter_supplied_runs(browser: Any, pages: dict) -> None:
    browser.get(pages["hostile"])
    assert browser.execute_script("return window.__xss === undefined;") is True
    assert browser.find_element("css selector", "form.filters").is_displayed()
    header = browser.find_element("css selector", "table.matrix thead th[data-column]")
    assert EVIL in header.text
    assert browser.find_elements("css selector", "img") == []
    assert _severe(browser) == []


def test_without_javascript_the_page_is_whole(pages: dict) -> None:
    driver = _driver(javascript=False)
    try:
        driver.get(pages["every"])
        assert not driver.find_element("css selector", "form.filters").is_displayed()
        rows = driver.find_elements("css selector", "table.matrix tbody tr")
        assert rows and all(r.is_displayed() for r in rows)
        assert driver.find_element("css selector", "dl.legend").is_displayed()
    finally:
        driver.quit()


def test_the_docs_site_matrix_filters_and_every_link_resolves(browser: Any, site: str) -> None:
    browser.get(site + "compliance/")
    assert browser.find_element("css selector", "form.filters").is_displayed()
    _set_boxes(browser, "area", {"learner"})
    assert {area for _, area, _ in _visible_rows(browser)} == {"learner"}
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('#xpspec-matrix a')).map(a => a.href);"
    )
    targets: dict[str, set[str]] = {}
    for href in hrefs:
        page, fragment = urldefrag(href)
        targets.setdefault(page, set()).add(fragment)
    assert any("/spec/" in p for p in targets) and any("/compliance/" in p for p in targets)
    assert _broken(browser, targets) == []


def _broken(browser: Any, targets: dict[str, set[str]]) -> list[str]:
    """The links among ``targets`` (page: fragments) whose page is missing or has no element
    of that id."""
    broken = []
    for page, fragments in sorted(targets.items()):
        browser.get(page)
        found = browser.execute_script(
            "return arguments[0].filter(f => !f || document.getElementById(f));",
            sorted(fragments),
        )
        broken += [f"{page}#{f}" for f in sorted(fragments) if f not in found]
        assert "404" not in browser.title, page
    return broken


def test_a_sweep_page_of_the_docs_site_filters_and_every_link_resolves(
    browser: Any, site: str
) -> None:
    """The matrix page links each committed version sweep (docs/sweeps/); its page lists the
    releases, filters its matrix of releases, and its links resolve."""
    browser.get(site + "compliance/")
    browser.find_element("css selector", "ul.sweeps a").click()
    assert "/compliance/sweeps/" in browser.current_url
    releases = browser.find_elements("css selector", "table.runs tbody tr")
    assert len(releases) >= 2
    assert browser.find_element("css selector", "form.filters").is_displayed()
    _set_boxes(browser, "area", {"replay"})
    assert {area for _, area, _ in _visible_rows(browser)} == {"replay"}
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('#xpspec-sweep a')).map(a => a.href);"
    )
    targets: dict[str, set[str]] = {}
    for href in hrefs:
        page, fragment = urldefrag(href)
        targets.setdefault(page, set()).add(fragment)
    assert any("/spec/" in p for p in targets)
    assert _broken(browser, targets) == []


def test_a_details_page_of_the_docs_site_shows_its_detail(browser: Any, site: str) -> None:
    browser.get(site + "compliance/")
    link = browser.find_element("css selector", "table.matrix td.o-finding a")
    link.click()
    section = browser.find_element("css selector", "section.detail:target")
    assert section.find_element("css selector", "pre.repro").text.startswith("xpspec trace ")
    assert section.find_element("css selector", "pre.explain").text.startswith("xpspec explain ")
    scenario = section.find_element("css selector", "a.scenario-json")
    scenario.click()
    assert browser.find_element("css selector", "pre.scenario:target").text.startswith("{")
    folder = os.environ.get("XPSPEC_SCREENSHOTS")
    if folder:  # pictures for a person to look at
        browser.get(site + "compliance/")
        browser.execute_script("document.getElementById('matrix').scrollIntoView();")
        browser.save_screenshot(str(Path(folder) / "compliance-matrix.png"))
        link = browser.find_element("css selector", "table.matrix td.o-finding a")
        link.click()
        browser.save_screenshot(str(Path(folder) / "compliance-detail.png"))
