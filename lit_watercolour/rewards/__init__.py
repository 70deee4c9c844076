"""Reward terms, their mix, the judge backends and the reference pool.

Terms load their models in `setup(device)` (the `RewardModels` callback calls it), never when built.
"""

from lit_watercolour.rewards.base import RewardTerm, TermScores
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.hpsv3 import HPSv3Term
from lit_watercolour.rewards.image_stats import ImageStatsTerm
from lit_watercolour.rewards.judge import JudgeTerm
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix, mix_rewards
from lit_watercolour.rewards.pool import ReferencePool
from lit_watercolour.rewards.transformers_judge import TransformersJudge

__all__ = [
    "GateTerm", "HPSv3Term", "ImageStatsTerm", "JudgeTerm", "LengthTerm", "OpenAIJudge", "ReferencePool", "RewardMix",
    "RewardTerm", "TermScores", "TransformersJudge", "mix_rewards",
]


def __getattr__(name: str):
    if name == "OpenAIJudge":  # the openai SDK is slow to import and only the HTTP judge needs it
        from lit_watercolour.rewards.openai_judge import OpenAIJudge

        return OpenAIJudge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
