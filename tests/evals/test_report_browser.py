"""The eval page in a real headless Chromium: every image decodes, one row per problem, the table sorts.

Rendered from the committed suite records (docs/benchmarks-data/results.jsonl, 24 problems on an
H200). Skips without Chromium unless STITCHCUDA_REQUIRE_BROWSER=1 (which .ci/run sets, after
installing Debian's chromium), so CI cannot pass by skipping it.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("websocket")

from evals.report.browser import Browser, find_browser  # noqa: E402
from evals.report.suite_page import write_suite_report  # noqa: E402
from tools.roofline import KNOWN  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SUITE_RECORDS = REPO / "docs" / "benchmarks-data" / "results.jsonl"

if find_browser() is None:
    if os.environ.get("STITCHCUDA_REQUIRE_BROWSER") == "1":
        raise RuntimeError("STITCHCUDA_REQUIRE_BROWSER=1 but no Chromium is installed")
    pytest.skip("no Chromium (apt-get install chromium)", allow_module_level=True)

SORT_BY_VS_EAGER = """
(function () {
  var table = document.getElementById('problems');
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var column = headers.findIndex(function (h) { return h.textContent === 'vs eager'; });
  function values() {
    return Array.prototype.slice.call(table.tBodies[0].rows).map(function (r) {
      return r.cells[column].getAttribute('data-value');
    });
  }
  headers[column].click();
  var ascending = values();
  headers[column].click();
  return JSON.stringify({ascending: ascending, descending: values()});
})()
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("page")
    return write_suite_report(SUITE_RECORDS, folder, ceilings_of=lambda gpu: KNOWN["NVIDIA H200"])


def test_every_image_loads_and_the_table_has_a_row_per_problem(page: Path) -> None:
    problems = {
        json.loads(line)["problem"] for line in SUITE_RECORDS.read_text().splitlines() if line.strip()
    }
    shot = page.parent / "screenshot.png"
    with Browser(width=1280, height=1800, scale=0.5) as browser:
        browser.open(page)
        facts = browser.check()
        browser.screenshot(shot)
    assert facts["title"] == "StitchCUDA eval report"
    assert facts["images"] == 4 and facts["loaded"] == 4, facts["broken"]
    assert facts["rows"] == len(problems) == 24
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000  # a page, not a blank frame
    assert png_size(data) == (640, 900)  # the window, at the device scale


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def test_a_full_page_screenshot_reaches_the_last_table_row(page: Path) -> None:
    shot = page.parent / "full.png"
    last_row_bottom = (
        "document.querySelector('table#problems tbody tr:last-child').getBoundingClientRect().bottom"
        " + window.scrollY"
    )
    with Browser(width=1280, height=900, scale=0.5) as browser:
        browser.open(page)
        width, height = browser.page_size()
        bottom = float(browser.evaluate(last_row_bottom))
        browser.screenshot(shot, full_page=True)
    assert width <= 1280 and height > 2 * 900  # the page is longer than the window
    assert bottom <= height
    assert png_size(shot.read_bytes()) == (640, round(height * 0.5))


def test_clicking_a_header_sorts_numerically_both_ways(page: Path) -> None:
    with Browser() as browser:
        browser.open(page)
        order = json.loads(browser.evaluate(SORT_BY_VS_EAGER))
    ascending = [float(v) if v else float("-inf") for v in order["ascending"]]
    assert ascending == sorted(ascending) and len(ascending) == 24
    assert order["descending"] == list(reversed(order["ascending"]))
    assert ascending[-1] > 3.0  # 2/6_Scale_Bias_Tanh_Clamp's 3.92x ends up last, not sorted as text


def test_a_run_page_opens_from_its_link_with_every_image_and_the_model_calls(tmp_path: Path) -> None:
    from test_report_pages import RECORDED_CALLS, llm_run

    out = tmp_path / "eval"
    llm_run(out / "runs" / "level1" / "4_Softmax")
    records = [json.loads(line) for line in SUITE_RECORDS.read_text().splitlines() if line.strip()]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    suite_page = write_suite_report(out, ceilings_of=lambda gpu: KNOWN["NVIDIA H200"])
    run_facts = """
    (function () {
      var images = Array.prototype.slice.call(document.images);
      return JSON.stringify({
        url: location.href,
        title: document.title,
        images: images.length,
        loaded: images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
        calls: document.querySelectorAll('table#model-calls tbody tr').length,
        headings: Array.prototype.map.call(document.querySelectorAll('h2'), function (h) { return h.textContent; })
      });
    })()
    """
    with Browser() as browser:
        browser.open(suite_page)
        href = browser.evaluate(
            "Array.from(document.querySelectorAll('table#problems a')).map(a => a.href)"
            ".find(h => h.includes('4_Softmax')) || ''"
        )
        assert href.endswith("/runs/level1/4_Softmax/report.html")  # the link, resolved by the browser
        browser.open(Path(unquote(urlparse(href).path)))
        facts = json.loads(browser.evaluate(run_facts))
    assert facts["title"] == "StitchCUDA run: level1/4_Softmax"
    assert facts["images"] == 3 and facts["loaded"] == 3
    assert facts["calls"] == len(RECORDED_CALLS)
    assert facts["headings"] == [
        "Iteration trajectory",
        "Time split",
        "Kernel roofline (Nsight Compute)",
        "Model calls",
    ]
