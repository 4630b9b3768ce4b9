"""The report in a real browser: Debian's headless Chromium loads index.html and the trend page from disk
(file://), with no console error, every plot element present and not empty. A full-page screenshot of each is kept
in tests/artifacts/ (or $CHAOS_TEST_ARTIFACTS) for a human to look at.

Needs `apt-get install -y chromium chromium-driver` (.ci/run installs them). Skipped when they are absent, unless
CHAOS_REQUIRE_BROWSER=1 (set by .ci/run), which makes their absence a failure: CI must not go green by skipping."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from chaos.history import read_history
from chaos.report import PANELS, write_report, write_trend

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runs"
ARTIFACTS = Path(os.environ.get("CHAOS_TEST_ARTIFACTS", ROOT / "tests" / "artifacts"))
RUN = "20261123T081854-smoke-13866"  # a cut of a real smoke run (tests/fixtures/runs/README.md)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        message = "chromium and chromedriver are not installed; run: apt-get install -y chromium chromium-driver"
        if os.environ.get("CHAOS_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # both paths are given: Selenium Manager must never download
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("browser") / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


def load(driver, page: Path) -> list[dict]:
    """Open a page from disk; return the console entries it logged."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(page.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return driver.get_log("browser")


def screenshot(driver, name: str) -> Path:
    """The whole page: the window is made as tall as the document first."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 600), 12000))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    return path


def plots(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "div.plot[data-panel]")


def assert_plots_drawn(elements) -> None:
    from selenium.webdriver.common.by import By

    for element in elements:
        panel = element.get_attribute("data-panel")
        size = element.size
        assert size["width"] > 100 and size["height"] > 100, (panel, size)
        if "nodata" in element.get_attribute("class").split():
            assert "no data" in element.text
            continue
        svg = element.find_element(By.TAG_NAME, "svg")
        assert svg.size["width"] > 100 and svg.size["height"] > 80, (panel, svg.size)
        # Data drawn: a line or marker of the plot has a real extent on screen.
        drawn = element.find_elements(By.CSS_SELECTOR, "g[id*='-series-'] path, g[id*='-series-'] use")
        assert any(d.size["width"] > 2 or d.size["height"] > 2 for d in drawn), f"{panel}: nothing drawn"


def expected_panels(run_dir: Path) -> tuple[int, int]:
    """(plots, of which "no data"): six per arm with a history; "no data" where a panel's metrics are null in
    every sample of the arm."""
    total = empty = 0
    for history in sorted(run_dir.glob("*/*/history.jsonl")):
        samples = [r for r in read_history(history) if r["type"] == "sample"]
        total += len(PANELS)
        empty += sum(not any(s.get(m.key) is not None for s in samples for m in panel.metrics) for panel in PANELS)
    return total, empty


def test_report_renders_every_plot_without_console_errors(browser, runs):
    page = write_report(runs / RUN)
    entries = load(browser, page)
    severe = [e for e in entries if e.get("level") == "SEVERE"]
    assert not severe, severe
    assert browser.title.startswith("FAILED")
    elements = plots(browser)
    total, empty = expected_panels(runs / RUN)
    assert len(elements) == total == 6 * len(PANELS)
    assert sum("nodata" in e.get_attribute("class") for e in elements) == empty
    assert_plots_drawn(elements)
    screenshot(browser, "report-index.png")
    shutil.copy(ARTIFACTS / "report-index.png", runs / RUN / "report-screenshot.png")


def test_trend_page_renders_without_console_errors(browser, runs):
    page = write_trend(runs, runs / "trend.html")
    entries = load(browser, page)
    assert not [e for e in entries if e.get("level") == "SEVERE"], entries
    elements = plots(browser)
    assert len(elements) == 5 * 3  # five experiments, three trend plots each
    assert_plots_drawn(elements)
    assert "regression" in browser.find_element("css selector", "td.regression").text
    screenshot(browser, "report-trend.png")


def test_console_errors_are_caught(browser, tmp_path):
    """The console check above can fail: a page with a script error is seen as SEVERE."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><link rel='icon' href='data:,'></head>"
                    "<body><script>throw new Error('deliberate')</script></body></html>")
    entries = load(browser, page)
    assert any(e.get("level") == "SEVERE" and "deliberate" in e.get("message", "") for e in entries), entries


RED = (207, 34, 46)  # #cf222e: FAILED, "not recovered"


def red_pixels(png: bytes) -> int:
    """Pixels of a screenshot within a small distance of the page's red."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    pixels = image.load()
    return sum(1 for x in range(width) for y in range(height)
               if sum(abs(a - b) for a, b in zip(pixels[x, y], RED)) < 60)


def test_failures_come_first_and_not_recovered_is_red(browser, runs, tmp_path):
    """Issue 18: on a stored run with failures (run 13866: three arms failed, none recovered: issue 36), the failures
    block is the first thing under the banner, visible without scrolling, and "not recovered" is drawn in red,
    unlike "–" (not applicable). Screenshots of the first screen and of both elements go to pytest's tmp dir."""
    from selenium.webdriver.common.by import By

    page = write_report(runs / RUN)
    entries = load(browser, page)
    assert not [e for e in entries if e.get("level") == "SEVERE"], entries
    browser.set_window_size(1400, 1000)
    browser.execute_script("window.scrollTo(0, 0)")
    order = browser.execute_script("return Array.from(document.body.children).map(e => e.id || e.className)")
    assert order[:2] == ["banner", "failures"], order
    block = browser.find_element(By.ID, "failures")
    top, bottom, height = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight]", block)
    assert block.is_displayed() and 0 < top < 120 and bottom <= height, (top, bottom, height)
    assert block.find_element(By.TAG_NAME, "h2").text == "failures first: 3 arms did not pass"
    arms = block.find_elements(By.CSS_SELECTOR, "li.failing-arm")
    assert [a.get_attribute("data-arm") for a in arms] == [
        "kafka-broker-disconnect--hardened", "driver-latency--naive", "process-crash--hardened"]
    assert "4 of 7 measured steady samples outside [1, inf]" in arms[0].text
    assert all(a.is_displayed() for a in arms)
    # passed checks are folded away: present, not shown until opened
    folded = browser.find_elements(By.CSS_SELECTOR, "table.summary details.passed")
    assert folded and not any(d.get_attribute("open") for d in folded)
    assert not folded[0].find_elements(By.CSS_SELECTOR, "div.check")[0].is_displayed()

    cells = browser.find_elements(By.CSS_SELECTOR, "table.summary td.not-recovered")
    assert [c.text for c in cells] == ["not recovered", "not recovered", "not recovered"]
    for cell in cells:
        assert cell.value_of_css_property("color") in ("rgba(207, 34, 46, 1)", "rgb(207, 34, 46)")
        assert cell.value_of_css_property("font-weight") in ("700", "bold")
    dash = next(c for c in browser.find_elements(By.CSS_SELECTOR, "table.summary td.num") if c.text == "–")
    assert dash.value_of_css_property("color") not in ("rgba(207, 34, 46, 1)", "rgb(207, 34, 46)")

    shots = tmp_path / "screenshots"
    shots.mkdir()
    assert browser.save_screenshot(str(shots / "first-screen.png"))
    assert block.screenshot(str(shots / "failures-block.png"))
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cells[0])
    assert cells[0].screenshot(str(shots / "not-recovered.png"))
    assert dash.screenshot(str(shots / "not-applicable.png"))
    # what the pixels show: the block has its red border, the cell red text on a red tint, the dash none
    assert red_pixels((shots / "failures-block.png").read_bytes()) > 500
    assert red_pixels((shots / "not-recovered.png").read_bytes()) > 20
    assert red_pixels((shots / "not-applicable.png").read_bytes()) == 0
    assert (shots / "first-screen.png").stat().st_size > 20_000
