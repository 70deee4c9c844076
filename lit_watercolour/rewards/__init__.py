"""Reward terms, their mix, the judge backends and the reference pool.

Heavy imports (transformers models) happen only when a term or backend is built.
"""

from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.hpsv3 import HPSv3Scorer
from lit_watercolour.rewards.image_stats import ImageStatsScorer
from lit_watercolour.rewards.judge import PairwiseJudge
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix, mix_rewards
from lit_watercolour.rewards.openai_judge import OpenAIJudge
from lit_watercolour.rewards.pool import ReferencePool
from lit_watercolour.rewards.transformers_judge import TransformersJudge

__all__ = [
    "GateTerm", "HPSv3Scorer", "ImageStatsScorer", "LengthTerm", "OpenAIJudge", "PairwiseJudge", "ReferencePool",
    "RewardMix", "RewardTerm", "TransformersJudge", "mix_rewards",
]
