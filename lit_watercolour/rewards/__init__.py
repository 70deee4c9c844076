"""Reward terms, their mix, the judge backends and the reference pool.

Heavy imports (transformers models) happen only when a term or backend is built.
"""

from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.embedded import EmbeddedScorer
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.hpsv3 import HPSv3Scorer
from lit_watercolour.rewards.judge import PairwiseJudge
from lit_watercolour.rewards.judge_http import OpenAIJudge
from lit_watercolour.rewards.judge_vlm import TransformersJudge
from lit_watercolour.rewards.length import LengthTerm
from lit_watercolour.rewards.mix import RewardMix, mix_rewards, resolve_weights
from lit_watercolour.rewards.pool import ReferencePool

__all__ = [
    "EmbeddedScorer", "GateTerm", "HPSv3Scorer", "LengthTerm", "OpenAIJudge", "PairwiseJudge", "ReferencePool",
    "RewardMix", "RewardTerm", "TransformersJudge", "mix_rewards", "resolve_weights",
]
