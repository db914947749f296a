"""The reward core (no RL engine): `score(sample, settings)` and the Sample/Breakdown it works with."""

from rl.reward.core import RewardSettings, combine, make_sample, score
from rl.reward.rule import RuleSettings
from rl.reward.sample import DIMENSIONS, Breakdown, Sample

__all__ = [
    "DIMENSIONS",
    "Breakdown",
    "RewardSettings",
    "RuleSettings",
    "Sample",
    "combine",
    "make_sample",
    "score",
]
