"""Anti-hacking, measured: every honest and adversarial candidate of tests/candidates through the reward.

The candidates are assembled as the test harness assembles them (a `# harness-base:` line replaced by
the shared extension), scored by the real reward core on the static path (the real hack checks, the
offline planner's plan), and judged against each candidate's own `# harness-expect:` line. The table
recorded in docs/rl-data/anti_hacking_static/ must be the one this code writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.candidates import candidate_source as harness_source
from support.candidates import expectation as harness_expectation

from rl import anti_hacking
from rl.reward.core import HACK_REWARD

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "candidates"
RECORDED = REPO / "docs" / "rl-data" / "anti_hacking_static"
RERECORD = "python -m rl.anti_hacking tests/candidates --rule static --out docs/rl-data/anti_hacking_static"


def test_candidates_are_scored_as_the_harness_runs_them() -> None:
    listed = anti_hacking.candidates(CANDIDATES)
    assert {kind for kind, _, _ in listed} == {"honest", "adversarial"}
    shared = 0
    for _, path, problem in listed:
        assert problem.is_file(), problem
        assert anti_hacking.candidate_source(path) == harness_source(path), path.name
        assert anti_hacking.expectation(path) == harness_expectation(path), path.name
        shared += "# harness-base:" in path.read_text()
    assert shared > 0  # some cheats share an extension: the assembly above is exercised


def test_static_path_every_cheat_it_can_see_earns_minus_one_below_every_honest_program(
    tmp_path: Path,
) -> None:
    code = anti_hacking.main([str(CANDIDATES), "--rule", "static", "--workers", "2", "--out", str(tmp_path)])
    table = json.loads((tmp_path / "anti_hacking.json").read_text())
    rows = table["rows"]
    assert code == 0 and table["failures"] == [] and table["path"] == "static"

    adversarial = sorted((CANDIDATES / "adversarial").glob("*.py"))
    invisible = sorted(p.stem for p in adversarial if harness_expectation(p).get("static") == "clean")
    assert table["left_to_a_run"] == invisible and invisible  # only what the harness expects a run to catch
    for row in rows:
        if row["kind"] == "honest":
            assert not row["hacked"] and row["total"] > 0, row["candidate"]
        elif row["static_expectation"] != "clean":
            assert row["hacked"] and row["total"] == HACK_REWARD, row["candidate"]
        else:  # assembled with its base, its kernels are visible: not mistaken for a program without any
            assert not any("no_custom_kernel" in line for line in row["evidence"]), row["candidate"]
    # on the GPU path every cheat is judged: these very rows would fail there, so the rule can fail
    failed = anti_hacking.check(rows, "gpu")
    assert {line.split()[1] for line in failed if line.startswith("cheat ")} == set(invisible)

    recorded = json.loads((RECORDED / "anti_hacking.json").read_text())
    now = {r["candidate"]: (r["total"], r["hacked"], r["static_expectation"]) for r in rows}
    then = {r["candidate"]: (r["total"], r["hacked"], r.get("static_expectation")) for r in recorded["rows"]}
    assert now == then, f"the recorded table is stale; re-record it: {RERECORD}"
    assert (RECORDED / "anti_hacking.md").read_text() == (tmp_path / "anti_hacking.md").read_text(), RERECORD


def test_the_recorded_cpu_build_table_covers_every_candidate_and_passes() -> None:
    # recorded with `--rule build` (nvcc and g++ for every candidate, minutes); here only read back
    table = json.loads(
        (REPO / "docs" / "rl-data" / "anti_hacking_cpu_build" / "anti_hacking.json").read_text()
    )
    assert table["path"] == "build" and table["failures"] == []
    assert {r["candidate"] for r in table["rows"]} == {
        p.stem for _, p, _ in anti_hacking.candidates(CANDIDATES)
    }
    invisible = sorted(
        r["candidate"]
        for r in table["rows"]
        if r["static_expectation"] == "clean" and r["kind"] == "adversarial"
    )
    assert table["left_to_a_run"] == invisible
    assert all(r["rule"]["path"] == "cpu-build" for r in table["rows"])
    assert anti_hacking.check(table["rows"], "build") == []
