"""Many answers scored at once: a thread pool of worker evaluations, and a memo of finished ones.

Why: a GRPO step scores B x G answers, each a build and a timed run in its own worker process. The
pool runs them side by side (builds overlap on the CPUs; the worker's device lock serialises the
timing on one GPU), `ascore_many` lets an async trainer await a whole step, and identical answers
(frequent early in training) are scored once.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from rl.reward.core import RewardSettings, score
from rl.reward.sample import Breakdown, Sample

MEMO_SIZE = 4096


def sample_key(sample: Sample) -> str:
    """What determines a sample's score: problem, skill, mode, previous program, feedback, completion."""
    parts = [
        sample.task.name,
        sample.task.source,
        sample.skill,
        sample.mode,
        sample.previous or "",
        sample.feedback.model_dump_json() if sample.feedback else "",
        sample.completion,
    ]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class RewardService:
    """Scores samples in parallel with one RewardSettings; safe to share between threads."""

    def __init__(self, settings: RewardSettings | None = None, workers: int = 4) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.settings = settings or RewardSettings()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stitchcuda-reward")
        self._memo: OrderedDict[str, Breakdown] = OrderedDict()
        self._lock = threading.Lock()

    def _score_one(self, sample: Sample) -> Breakdown:
        key = sample_key(sample)
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        result = score(sample, self.settings)
        with self._lock:
            self._memo[key] = result
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return result

    def score_many(self, samples: Sequence[Sample]) -> list[Breakdown]:
        """Scores in input order; duplicates within the batch are evaluated once."""
        first: dict[str, int] = {}
        futures = {}
        for index, sample in enumerate(samples):
            key = sample_key(sample)
            if key not in first:
                first[key] = index
                futures[key] = self.pool.submit(self._score_one, sample)
        return [futures[sample_key(s)].result() for s in samples]

    async def ascore_many(self, samples: Sequence[Sample]) -> list[Breakdown]:
        """`score_many` for an event loop: the step awaits while the pool works."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.score_many, list(samples))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
