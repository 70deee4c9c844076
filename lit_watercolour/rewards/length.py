"""The length term: a soft push towards longer sketches, counting code only.

Tokens are estimated as characters / 4 of the code with comments removed and runs of
whitespace collapsed to one space (the recipe counts len(source) / 4; stripping comments
stops a model from padding with prose). The curve is the recipe's:

    tokens <  min_tokens               -> 0     (too short to be a painting)
    min_tokens .. full_tokens          -> linear ramp 0 -> 1
    full_tokens .. max_tokens          -> 1     (saturated: longer is not better)
    tokens >  max_tokens               -> 0     (runaway / degenerate output)
"""

from __future__ import annotations

import re

import torch

from lit_watercolour.rewards.base import RewardTerm, TermScores, summary_metrics
from lit_watercolour.records import Rollout
from lit_watercolour.sketch import strip_comments

_SPACE = re.compile(r"\s+")


def code_text(code: str) -> str:
    """The code the length term counts: comments removed (by the gate's own scanner), whitespace collapsed."""
    return _SPACE.sub(" ", strip_comments(code)).strip()


def code_tokens(code: str) -> float:
    return len(code_text(code)) / 4.0


def length_curve(tokens: float, min_tokens: float = 150, full_tokens: float = 3000, max_tokens: float = 6000) -> float:
    if tokens < min_tokens or tokens > max_tokens:
        return 0.0
    if tokens >= full_tokens:
        return 1.0
    return (tokens - min_tokens) / (full_tokens - min_tokens)


class LengthTerm(RewardTerm):
    name = "length"

    def __init__(self, weight: float = 0.05, min_tokens: int = 150, full_tokens: int = 3000, max_tokens: int = 6000) -> None:
        super().__init__(weight)
        if not 0 <= min_tokens < full_tokens <= max_tokens:
            raise ValueError("need 0 <= min_tokens < full_tokens <= max_tokens")
        self.min_tokens, self.full_tokens, self.max_tokens = min_tokens, full_tokens, max_tokens

    def score(self, rollouts: list[Rollout]) -> TermScores:
        tokens = [code_tokens(r.code or "") for r in rollouts]
        scores = torch.tensor(
            [length_curve(t, self.min_tokens, self.full_tokens, self.max_tokens) for t in tokens], dtype=torch.float32
        )
        return TermScores(scores, {**summary_metrics(scores), "code_tokens": sum(tokens) / max(len(tokens), 1)})
