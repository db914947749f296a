"""Whether a verified program is really faster than eager: the side-by-side ratio against its noise.

Why: a speedup of 1.02x from interleaved rounds whose ratios scatter by 3% is not a speedup. The
report must say so plainly (issue: never ship a regression), and when two verified candidates are
compared, the ratio each was timed at against eager in its own window is the fair measure: their
raw times come from different moments of a shared machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graph.artifacts import TestResult

NOISE_FLOOR = 0.02  # below this a ratio is never called a difference, whatever the rounds say
NOISE_SIGMAS = 2.0  # how many standard errors of the mean ratio the band spans


@dataclass(frozen=True)
class SpeedVerdict:
    """faster, within_noise, slower or untimed, the band used, and one line for the report."""

    kind: str
    band: float
    text: str


def noise_band(cv: float | None, rounds: int) -> float:
    """Half-width of the 'no difference' band around 1.0: two standard errors of the mean ratio,
    never under NOISE_FLOOR; without round statistics, the floor."""
    if cv is None or rounds < 2:
        return NOISE_FLOOR
    return max(NOISE_FLOOR, NOISE_SIGMAS * cv / math.sqrt(rounds))


def speed_verdict(speedup: float | None, cv: float | None = None, rounds: int = 0) -> SpeedVerdict:
    """The plain statement of a speedup against eager measured side by side."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return SpeedVerdict("untimed", NOISE_FLOOR, "not timed against eager")
    band = noise_band(cv, rounds)
    noise = f"noise band ±{band:.1%}" + (f" from {rounds} rounds" if rounds >= 2 and cv is not None else "")
    if speedup > 1.0 + band:
        return SpeedVerdict("faster", band, f"faster than eager: {speedup:.2f}x ({noise})")
    if speedup < 1.0 - band:
        return SpeedVerdict("slower", band, f"slower than eager: {speedup:.2f}x ({noise})")
    return SpeedVerdict(
        "within_noise", band, f"no faster than eager: {speedup:.2f}x is within the noise ({noise})"
    )


def verdict_of(test: TestResult) -> SpeedVerdict:
    return speed_verdict(test.speedup_vs_eager, test.speedup_cv, test.speedup_rounds)


COVERAGE_STEP = 0.05  # operator coverage differences below this are the profile's noise, not a change
_VERDICT_RANK = {"clean": 0, "suspicious": 1}  # suspicious: PyTorch fallbacks (hacked never competes)


def less_covered(a: TestResult, b: TestResult) -> bool:
    """Whether `a` leaves more of the work to PyTorch than `b`: a worse hack-check verdict, or a
    measured operator coverage lower by more than COVERAGE_STEP."""
    rank_a, rank_b = _VERDICT_RANK.get(a.verdict, 2), _VERDICT_RANK.get(b.verdict, 2)
    if rank_a != rank_b:
        return rank_a > rank_b
    if a.operator_coverage is None or b.operator_coverage is None:
        return False
    return a.operator_coverage < b.operator_coverage - COVERAGE_STEP


def beats(new: TestResult, best: TestResult | None) -> bool:
    """Whether `new` should replace `best` as the reported program: by the side-by-side speedup
    when both were timed against eager, else by the candidate's own time.

    Coverage breaks ties the noise cannot: a candidate that hands more work to PyTorch (say, after
    the fix branch demoted a group) wins only when it is faster beyond both candidates' noise bands,
    and one that covers more wins unless it is slower beyond them. The product is CUDA programs;
    a fallback that is merely no slower is not an improvement.
    """
    if best is None:
        return True
    if new.speedup_vs_eager and best.speedup_vs_eager:
        ratio = new.speedup_vs_eager / best.speedup_vs_eager
        band = max(verdict_of(new).band, verdict_of(best).band)
        if less_covered(new, best):
            return ratio > 1.0 + band
        if less_covered(best, new):
            return ratio >= 1.0 - band
        return ratio > 1.0
    return (new.candidate_ms or math.inf) < (best.candidate_ms or math.inf)
