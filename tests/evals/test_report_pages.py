"""The pages as files: an LLM run's twin carries report.md's model calls, and a redraw in a fresh process
gives the same bytes.

The model calls are those of the recorded run against SmolLM2-135M behind `transformers serve`
(docs/llm.md, "Recorded here"), as finalize writes them into report.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from support.report_runs import make_run_dir, run_report  # noqa: E402

from evals.report.run_page import write_run_page  # noqa: E402
from nodes.support.report import render_markdown  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SUITE_RECORDS = REPO / "docs" / "benchmarks-data" / "results.jsonl"
MODEL = "/root/.cache/stitchcuda/models/SmolLM2-135M-Instruct"
BASE_URL = "http://127.0.0.1:42381/v1"
TRUNCATED = (
    "the answer ends inside an unterminated ```python block opened at line 1 "
    "(truncated answer; the answer hit the token limit)"
)
RECORDED_CALLS: list[dict[str, Any]] = [
    {"role": "planner", "model": MODEL, "base_url": BASE_URL, "outcome": "rejected",
     "detail": "the answer hit the token limit before the JSON was complete", "mode": None, "method": "text",
     "candidate": None, "latency_s": 272.4, "answer_chars": 3705, "input_tokens": 2509, "output_tokens": 768,
     "finish_reason": "length"},
    {"role": "coder", "model": MODEL, "base_url": BASE_URL, "outcome": "rejected", "detail": TRUNCATED,
     "mode": "write", "method": None, "candidate": 1, "latency_s": 61.2, "answer_chars": 1860,
     "input_tokens": 2295, "output_tokens": 768, "finish_reason": "length"},
    {"role": "coder", "model": MODEL, "base_url": BASE_URL, "outcome": "failed",
     "detail": f"coder model '{MODEL}' at {BASE_URL}: cannot connect (1 attempt): Connection error.",
     "mode": "write", "method": None, "candidate": 2, "latency_s": 68.0, "answer_chars": 0,
     "input_tokens": None, "output_tokens": None, "finish_reason": None},
]  # fmt: skip


class Tables(HTMLParser):
    """The text of every cell of the table with a given id, row by row, and the paragraphs' text."""

    def __init__(self, ident: str) -> None:
        super().__init__()
        self.ident, self.rows, self.notes = ident, [], []
        self._inside = self._cell = self._note = False
        self.rows: list[list[str]]
        self.notes: list[str]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "table":
            self._inside = values.get("id") == self.ident
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("td", "th"):
            self._cell = True
            self.rows[-1].append("")
        elif tag == "p":
            self._note = True
            self.notes.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._inside = False
        elif tag in ("td", "th"):
            self._cell = False
        elif tag == "p":
            self._note = False

    def handle_data(self, data: str) -> None:
        if self._cell and self._inside:
            self.rows[-1][-1] += data
        elif self._note:
            self.notes[-1] += data


def llm_run(folder: Path) -> dict[str, Any]:
    make_run_dir(folder)
    report = run_report() | {"policy": "llm", "model_calls": RECORDED_CALLS}
    report |= {"iterations": 3, "build_s": 10.0, "covered_ops": ["softmax"], "uncovered_ops": []}
    (folder / "report.json").write_text(json.dumps(report))
    return report


def markdown_rows(markdown: str) -> tuple[str, list[list[str]]]:
    """report.md's "Model calls" section: its summary line and its table's rows as cells."""
    section = markdown[markdown.index("## Model calls") :].splitlines()
    summary = next(line for line in section[1:] if line.strip())
    rows = [line for line in section if line.startswith("| ")]
    split = [[c.strip().replace("\\|", "|") for c in row.strip("|").split(" | ")] for row in rows]
    return summary, split


def test_an_llm_runs_twin_shows_report_mds_model_calls_cell_for_cell(tmp_path: Path) -> None:
    report = llm_run(tmp_path)
    page = Tables("model-calls")
    page.feed(write_run_page(tmp_path).read_text())
    summary, md_rows = markdown_rows(render_markdown(report))
    assert summary == "3 calls (2 rejected, 1 failed); 401.6 s waiting for " + MODEL + "."
    assert summary in page.notes
    header, *rows = page.rows
    assert header == md_rows[0] and len(rows) == len(RECORDED_CALLS) == 3
    assert rows == md_rows[1:]  # the twin and the Markdown cannot disagree
    assert rows[0][:3] == ["1", "planner", "text"] and rows[1][2] == "write #1"
    assert rows[0][3] == "SmolLM2-135M-Instruct" and rows[0][6] == "2509/768" and rows[2][6] == "-/-"
    assert [r[8] for r in rows] == ["rejected", "rejected", "failed"]
    assert rows[1][9] == TRUNCATED  # the reason travels whole, backticks and all


def test_a_run_without_model_calls_has_no_such_section(tmp_path: Path) -> None:
    make_run_dir(tmp_path)
    text = write_run_page(tmp_path).read_text()
    assert "Model calls" not in text and 'id="model-calls"' not in text


REDRAW = """
import sys
from pathlib import Path
from evals.report.suite_page import write_suite_report
from tools.roofline import KNOWN
records, out = Path(sys.argv[1]), Path(sys.argv[2])
write_suite_report(records, out, ceilings_of=lambda gpu: KNOWN["NVIDIA H200"])
"""


def _redraw(target: Path, seed: str, source: Path) -> dict[str, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "MPLCONFIGDIR": str(target / ".mpl")}
    done = subprocess.run(
        [sys.executable, "-c", REDRAW, str(source), str(target)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        str(p.relative_to(target)): p.read_bytes()
        for p in sorted(target.rglob("*"))
        if p.is_file() and ".mpl" not in p.parts
    }


def test_the_suite_page_and_its_run_pages_are_the_same_bytes_from_two_processes(tmp_path: Path) -> None:
    """Fresh interpreters, different hash seeds, a cold and a separate matplotlib cache: same files."""
    source = tmp_path / "eval"
    llm_run(source / "runs" / "level1" / "4_Softmax")
    records = [json.loads(line) for line in SUITE_RECORDS.read_text().splitlines() if line.strip()]
    (source / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    first = _redraw(tmp_path / "first", "1", source)
    second = _redraw(tmp_path / "second", "2", source)
    pngs = [name for name in first if name.endswith(".png")]
    assert sorted(pngs) == [f"report-{n}.png" for n in ("coverage", "fast_p", "roofline", "speedups")]
    assert first == second
    runs = source / "runs" / "level1" / "4_Softmax"
    names = ("report.html", "report-trajectory.png", "report-time.png", "report-kernels.png")
    drawn = {name: (runs / name).read_bytes() for name in names}
    _redraw(tmp_path / "third", "3", source)  # redraws the run pages in place
    assert {name: (runs / name).read_bytes() for name in names} == drawn


COMPILE_RECORDS = REPO / "docs" / "benchmarks-data" / "compile-subset.results.jsonl"


def _level_pixels(png: bytes, colour: str, half: str) -> int:
    """How many pixels of one panel of a two-panel plot have exactly `colour` (a level's). The middle
    tenth is left out: the left panel's legend reaches into it."""
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(png)).convert("RGB")
    width, height = image.size
    box = (0, 0, width * 45 // 100, height) if half == "left" else (width * 55 // 100, 0, width, height)
    target = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    colours = image.crop(box).getcolors(maxcolors=1 << 24) or []
    return sum(count for count, pixel in colours if pixel == target)


def test_the_compile_panels_are_drawn_when_the_records_have_a_compile_baseline() -> None:
    """The committed suite records have no compile baseline (their compile panels say so); the committed
    compile subset (4 problems, eager and compile on the H200) must fill both compile panels."""
    from evals.report import suite_plots
    from evals.report.figures import LEVEL_COLOURS

    subset = [json.loads(line) for line in COMPILE_RECORDS.read_text().splitlines() if line.strip()]
    suite = [json.loads(line) for line in SUITE_RECORDS.read_text().splitlines() if line.strip()]
    assert all(r["speedup_vs_compile"] for r in subset) and not any(r["speedup_vs_compile"] for r in suite)
    level1 = LEVEL_COLOURS[0]
    levels = ["level1", "level2"]
    bars = suite_plots.speedup_bars(subset, levels)
    curves = suite_plots.fast_p_curves(subset, {"level1": 2, "level2": 2})
    for png in (bars, curves):
        assert _level_pixels(png, level1, "left") > 50  # vs eager
        assert _level_pixels(png, level1, "right") > 50  # vs compile: drawn, not the placeholder
    empty = suite_plots.speedup_bars(suite, sorted({r["level"] for r in suite}))
    assert _level_pixels(empty, level1, "left") > 50 and _level_pixels(empty, level1, "right") == 0
