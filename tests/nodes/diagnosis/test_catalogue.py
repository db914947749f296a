"""nodes.diagnosis.catalogue: the rules' data is what the engine reads, complete, and what the docs list."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from conftest import REPO
from support.profiles import MEASURED, RELU, bad_kernels, host_sync, records, rules, system

from nodes import diagnosis
from nodes.diagnosis import catalogue


def test_every_row_has_the_tags_retrieval_needs() -> None:
    for key, row in catalogue.CATALOGUE.items():
        assert row.key == key
        if row.finding == "no-gpu-profile":
            continue  # nothing to retrieve for: the profile has no GPU evidence
        assert row.symptoms and row.metrics, key
        assert row.title or row.finding == "small-grid", key  # the addendum has no title of its own


def test_findings_carry_their_rows_tags_and_wording() -> None:
    relu = diagnosis.Evidence(
        system=system("relu_both", "candidate", 5, ("stitch_ew_vec_kernel",)),
        ncu=records("relu_candidate.raw.csv"),
        device="NVIDIA H200",
    )
    findings = [
        *bad_kernels().findings,
        *host_sync().findings,
        *diagnosis.diagnose(relu, plan=RELU, ceilings=MEASURED).findings,
    ]
    finding_ids = {row.finding for row in catalogue.CATALOGUE.values()}
    assert len({f.rule for f in findings}) >= 10
    for finding in findings:
        assert finding.rule in finding_ids
        rows = [row for row in catalogue.CATALOGUE.values() if row.finding == finding.rule]
        assert any(set(row.symptoms) <= set(finding.symptoms) for row in rows), finding.rule


def test_the_engine_reads_the_thresholds_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "launch-bound" in rules(host_sync())  # idle 82% of the forward
    stricter = replace(catalogue.LAUNCH_BOUND, limits={**catalogue.LAUNCH_BOUND.limits, "idle": 0.9})
    monkeypatch.setitem(catalogue.CATALOGUE, "launch-bound", stricter)
    assert "launch-bound" not in rules(host_sync())


def test_the_engine_reads_the_wording_from_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    row = catalogue.CATALOGUE["launch-bound"]
    reworded = replace(row, title="idle {idle:.0%}", symptoms=("idle GPU",))
    monkeypatch.setitem(catalogue.CATALOGUE, "launch-bound", reworded)
    launch = next(f for f in host_sync().findings if f.rule == "launch-bound")
    assert launch.title == "idle 82%" and launch.symptoms == ["idle GPU"]
    assert launch.query().startswith("launch bound. Symptoms: idle GPU.")


def test_the_profiling_doc_lists_every_finding() -> None:
    text = (REPO / "docs" / "profiling.md").read_text()
    table = text.split("| rule | fires when | impact |", 1)[1].split("\n\n", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    documented = {rule for cell in first_cells for rule in re.findall(r"`([a-z0-9-]+)`", cell)}
    findings = {row.finding for row in catalogue.CATALOGUE.values()} - {"small-grid"}
    assert documented == findings
