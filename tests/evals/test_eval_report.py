"""The report package: figures by hand, deterministic PNGs, the eval page and a run's HTML twin."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from support.report_runs import SOFTMAX_FLOPS, make_run_dir, run_report  # noqa: E402

from evals.report import suite_plots  # noqa: E402
from evals.report.run_page import write_run_page  # noqa: E402
from evals.report.suite_data import coverage, roofline_points, work_figures  # noqa: E402
from evals.report.suite_page import write_suite_report  # noqa: E402
from graph.cli import main  # noqa: E402
from nodes.support.run_summary import best_origin, kernel_roofline, markdown_sections, time_split  # noqa: E402
from tools.roofline import KNOWN  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SUITE_RECORDS = REPO / "docs" / "benchmarks-data" / "results.jsonl"
PNG = b"\x89PNG\r\n\x1a\n"


class PageParser(HTMLParser):
    """Every <img> src, every <a> href, and the rows of the table with id 'problems'."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.rows = 0
        self._in_problems = False
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        elif tag == "a":
            self.links.append(values.get("href") or "")
        elif tag == "table":
            self._in_problems = values.get("id") == "problems"
        elif tag == "tbody" and self._in_problems:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False


def parse(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text())
    return parser


def record(
    problem: str, level: str, status: str = "verified", eager: float | None = None, **extra: object
) -> dict:
    return {"problem": problem, "level": level, "status": status, "speedup_vs_eager": eager, **extra}


# ----------------------------------------------------------------------------------------------
# Figures by hand
# ----------------------------------------------------------------------------------------------


def test_fast_p_points_count_every_problem_of_the_level() -> None:
    rows = [
        record("level1/1_a", "level1", eager=0.5),
        record("level1/2_b", "level1", eager=1.5),
        record("level1/3_c", "level1", status="failed", eager=2.5),  # not correct: never fast
        record("level1/4_d", "level1", eager=2.0, verdict="hacked"),  # hacked: never fast
    ]
    ps, shares = suite_plots.fast_p_points(rows, total=5, baseline="eager")
    at = dict(zip(ps, shares, strict=True))
    assert ps[0] == 0.0 and ps[-1] == 3.0
    assert at[0.0] == pytest.approx(2 / 5) and at[1.0] == pytest.approx(1 / 5) and at[1.5] == 0.0
    assert suite_plots.fast_p_points(rows, 5, "compile")[1][0] == 0.0


def test_work_figures_come_from_the_record_else_the_run_else_the_suite_file(tmp_path: Path) -> None:
    assert work_figures(record("level1/4_Softmax", "level1", work_flops=7, work_bytes=9), None) == (7, 9)
    run = make_run_dir(tmp_path / "runs" / "level1" / "4_Softmax")
    assert run.exists()
    assert work_figures(record("level1/4_Softmax", "level1"), tmp_path) == (2_684_354_560, 4_294_967_296)
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    (suite / "1_Relu.py").write_text((REPO / "evals" / "suite" / "level1" / "1_ReLU.py").read_text())
    flops, nbytes = work_figures(record("level1/1_Relu", "level1"), None, [tmp_path / "suite"])  # type: ignore[misc]
    assert flops > 0 and nbytes > flops  # an elementwise op: under one FLOP per byte
    assert work_figures(record("level1/99_Nowhere", "level1"), None, [tmp_path / "suite"]) is None


def test_roofline_points_pair_ours_with_eager_and_skip_cpu_runs() -> None:
    rows = [
        record("level1/1_a", "level1", candidate_ms=2.0, baseline_eager_ms=4.0, device="NVIDIA H200",
               work_flops=4_000_000, work_bytes=1_000_000),
        record("level1/2_b", "level1", candidate_ms=2.0, device="cpu", work_flops=1, work_bytes=1),
        record("level1/3_c", "level1", status="failed", candidate_ms=3.0, verifier_eager_ms=1.0,
               device="NVIDIA H200", work_flops=10, work_bytes=10),
    ]  # fmt: skip
    first, failed = roofline_points(rows, None)
    assert first.intensity == 4.0 and first.throughput(first.ours_ms) == pytest.approx(2e9)
    assert first.throughput(first.eager_ms) == pytest.approx(1e9)
    assert failed.ours_ms is None and failed.eager_ms == 1.0  # a failed program has no point of its own


def test_coverage_prefers_the_measured_gpu_time_share() -> None:
    assert coverage({"operator_coverage": 0.8, "covered_ops": ["a"], "uncovered_ops": []}) == (
        0.8,
        "GPU time",
    )
    assert coverage({"covered_ops": ["a"], "uncovered_ops": ["b", "c"]}) == (pytest.approx(1 / 3), "op kinds")
    assert coverage({}) == (None, "-")


def test_time_split_and_trajectory_by_hand() -> None:
    report = run_report()
    split = time_split(report)
    assert split == {
        "build": 30.0,
        "correctness": 6.0,
        "timing": 6.0,
        "profiling": 4.0 + 7.0,
        "other checks": 50.0 - (30.0 + 6.0 + 6.0 + 4.0),
        "planning and coding": 3.0,
    }
    assert best_origin(report) == "candidate 3 of 3, from an optimisation turn, 1.00x vs eager"
    text = "\n".join(markdown_sections(report))
    assert "| 3 | optimize | passed | 1.000 | 1.00 | 10.0 | 8.0 | **best** |" in text
    assert "| 1 | write | build_error | - |" in text
    assert "| build | 30.0 | 50% |" in text  # of 60 s in all


def test_kernel_roofline_from_the_ncu_record() -> None:
    profile = json.loads((make_run_dir_in_memory() / "profiles" / "candidate-3.json").read_text())
    roofline = kernel_roofline(profile)
    assert roofline is not None
    (kernel,) = roofline["kernels"]
    raw = profile["ncu"]["kernels"][0]
    flops = SOFTMAX_FLOPS["fadd"] + SOFTMAX_FLOPS["fmul"] + 2 * SOFTMAX_FLOPS["ffma"]
    nbytes = raw["dram_bytes_read"] + raw["dram_bytes_write"]
    assert kernel["flops"] == flops and kernel["bytes"] == nbytes
    assert kernel["intensity"] == pytest.approx(flops / nbytes)
    assert kernel["flop_per_s"] == pytest.approx(flops / (raw["duration_ns"] / 1e9))
    assert kernel["bound"] == "memory-bound"
    assert kernel_roofline({"ncu": {"kernels": []}}) is None


_MEMORY_RUN: dict[str, Path] = {}


def make_run_dir_in_memory() -> Path:
    import tempfile

    if "dir" not in _MEMORY_RUN:
        _MEMORY_RUN["dir"] = make_run_dir(Path(tempfile.mkdtemp(prefix="report-run-")))
    return _MEMORY_RUN["dir"]


# ----------------------------------------------------------------------------------------------
# Pictures and pages
# ----------------------------------------------------------------------------------------------


def test_plots_are_byte_identical_when_redrawn_and_carry_no_software_stamp() -> None:
    rows = [json.loads(line) for line in SUITE_RECORDS.read_text().splitlines() if line.strip()]
    levels = sorted({r["level"] for r in rows})
    first, second = suite_plots.speedup_bars(rows, levels), suite_plots.speedup_bars(rows, levels)
    assert first.startswith(PNG) and first == second
    assert b"Software" not in first and b"matplotlib" not in first.lower()


def test_the_suite_page_from_the_committed_records(tmp_path: Path) -> None:
    page = write_suite_report(SUITE_RECORDS, tmp_path, ceilings_of=lambda gpu: KNOWN["NVIDIA H200"])
    records = [json.loads(line) for line in SUITE_RECORDS.read_text().splitlines() if line.strip()]
    parsed = parse(page)
    assert parsed.rows == len({r["problem"] for r in records}) == 24
    assert len(parsed.images) == 4
    for src in parsed.images:  # inline, and each one a PNG
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # works offline: no external assets
    for name in ("speedups", "fast_p", "roofline", "coverage"):
        assert (tmp_path / f"report-{name}.png").read_bytes().startswith(PNG)


def test_an_eval_folder_gets_run_pages_and_links_to_them(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    run = make_run_dir(out / "runs" / "level1" / "4_Softmax")
    rows = [
        record(
            "level1/4_Softmax",
            "level1",
            eager=1.0,
            candidate_ms=1.0,
            baseline_eager_ms=1.0,
            device="NVIDIA H200",
        ),
        record("level1/1_ReLU", "level1", status="failed"),
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", str(out)]) == 0
    parsed = parse(out / "report.html")
    assert parsed.rows == 2
    assert "runs/level1/4_Softmax/report.html" in parsed.links
    run_page = parse(run / "report.html")
    assert len(run_page.images) == 3 and all(s.startswith("data:image/png;base64,") for s in run_page.images)
    assert "report.md" in run_page.links
    assert (run / "report-kernels.png").read_bytes().startswith(PNG)
    # --out elsewhere: the links still reach the run pages
    assert main(["report", str(out), "--out", str(tmp_path / "page")]) == 0
    assert "../eval/runs/level1/4_Softmax/report.html" in parse(tmp_path / "page" / "report.html").links


def test_a_run_page_without_profiles_says_so_instead_of_a_broken_image(tmp_path: Path) -> None:
    report = run_report()
    report["attempts"] = []
    (tmp_path / "report.json").write_text(json.dumps(report))
    page = write_run_page(tmp_path)
    assert len(parse(page).images) == 3
    with pytest.raises(ValueError, match="no readable run report"):
        write_run_page(tmp_path / "missing")


def test_report_command_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "results.jsonl").write_text("{torn")
    assert main(["report", str(tmp_path)]) == 2
    assert "no complete records" in capsys.readouterr().err
