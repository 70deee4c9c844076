"""The pairwise judge term: is the candidate a better watercolour than each reference?

Per rollout, `references` images are drawn from the pool with the rollout's seed (shared by
its GRPO group, so a group competes against the same references). Each (candidate, reference)
pair is asked twice, once in each order, which turns a judge's position bias into a tie:

    per reference:  1 if the candidate wins both orders, 0.5 if the orders split, 0 if it loses both
    score        :  mean over resolved references

Both images of a pair are sent at the same size (`image_size`, the longer side; the recipe's
renders and references were 600 px), so a candidate rendered at another canvas size or pixel
density never meets its reference at a different scale.

A comparison whose call failed after its retries, or whose reply names neither image, is a
failed comparison (never a loss). A reference is resolved only when both of its orders are,
since one order alone carries the position bias the swap is there to cancel. With nothing
resolved the score is NaN, so the rollout is excluded rather than scored as a bad painting.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass
from typing import Protocol

import torch
from PIL import Image

from lit_watercolour.rewards.base import RewardTerm, TermScores, summary_metrics
from lit_watercolour.rewards.pool import DEFAULT_MIX, SHIPPED_POOL, ReferencePool
from lit_watercolour.records import Rollout

# The recipe's template and criteria, with paper white and restraint added from the brief.
CRITERIA = (
    "Prefer soft pigment bleeds, layered translucent washes that show through each other, "
    "varied edge softness where edges dissolve rather than stop, white paper left open where light falls, "
    "and the restraint of a deliberate, uncrowded composition. Muddy opaque blobs, uniform scribbles, "
    "hard flat edges, paint covering the sheet edge to edge and near-empty canvases are worse."
)
PROMPT = (
    "You are judging two generative watercolour paintings, image A first and image B second. "
    "Which one is the better watercolour painting? {criteria} "
    "Ignore what the paintings depict. Judge only how they are painted. "
    "State the winner first, as the single letter A or B, then a reason of at most twenty words."
)


@dataclass
class CallRecord:
    """One judge call, as the backends report it (for metrics and logs)."""

    latency_s: float
    ok: bool  # the call returned a reply that names a winner
    attempts: int = 1
    error: str = ""  # "timeout", "http 500", "malformed: ...", ...


class JudgeBackend(Protocol):
    """A judge: `compare` answers for each (image A, image B) PNG pair "A", "B", or None when the comparison
    failed. A backend that waits on the network also has `acompare`, the same as a coroutine (the rollout
    pipeline awaits it on its event loop); one with a model loads it in `setup(device)`, frees it in `teardown()`."""

    def compare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        ...


_LEADING = re.compile(r"""^[\s*_#>"'`(\[{]*(?:(?i:winner|answer|image|painting)\s*(?:is)?\s*[:=\-]?\s*[*"'(]*\s*)?([AB])\b""")


def parse_winner(reply: str | None) -> str | None:
    """"A" / "B" from a reply that states the winner first (plain text or {"winner": ...}), else None."""
    if not reply:
        return None
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    if text.startswith("{"):
        try:
            winner = str(json.loads(text).get("winner", "")).strip().upper()
        except (ValueError, AttributeError):
            winner = ""
        return winner if winner in ("A", "B") else None
    m = _LEADING.match(text)
    return m.group(1) if m else None


def fit_image(png: bytes, side: int) -> bytes:
    """The PNG scaled (up or down, aspect kept) so that its longer side is `side` px; as it is when it
    already is, or when `side` is 0."""
    img = Image.open(io.BytesIO(png))
    if side <= 0 or max(img.size) == side:
        return png
    scale = side / max(img.size)
    img = img.convert("RGB").resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def reference_score(first: str | None, second: str | None) -> float | None:
    """Score of one reference: `first` is the verdict with the candidate as A, `second` as B."""
    if first is None or second is None:
        return None
    return ((first == "A") + (second == "B")) / 2.0


class JudgeTerm(RewardTerm):
    """The pairwise judge as a reward term: the reference pool loads in `setup`, with the backend's model."""

    name = "judge"
    streams = True  # a rollout's comparisons start as its render arrives; the backend bounds the calls in flight

    def __init__(self, backend: JudgeBackend, weight: float = 0.60, pool: str = str(SHIPPED_POOL),
                 pool_revision: str | None = None, references: int = 4, mix: dict[str, float] | None = None,
                 criteria: str = CRITERIA, image_size: int = 600) -> None:
        super().__init__(weight)
        self.image_size = image_size  # longer side of both images of a pair, px; 0: as rendered
        self._reference_png: dict[str, bytes] = {}  # reference name -> PNG at image_size
        self.backend = backend
        self.pool_source, self.pool_revision = pool, pool_revision
        self.pool: ReferencePool | None = None
        self.references = references
        self.mix = dict(mix or DEFAULT_MIX)
        self.prompt = PROMPT.format(criteria=criteria)

    def setup(self, device) -> None:
        if self.pool is None:
            self.pool = ReferencePool.load(self.pool_source, revision=self.pool_revision)
        if hasattr(self.backend, "setup"):
            self.backend.setup(device)

    def teardown(self) -> None:
        self.pool, self._reference_png = None, {}
        if hasattr(self.backend, "teardown"):
            self.backend.teardown()

    def pairs(self, rollout: Rollout) -> list[tuple[bytes, bytes]]:
        """Per reference drawn for the rollout, (candidate, reference) then (reference, candidate)."""
        if rollout.render is None or rollout.render.png is None:
            raise ValueError("JudgeTerm scores rendered, gate-passed rollouts only")
        if self.pool is None:
            raise RuntimeError("JudgeTerm scores after setup(device): the RewardModels callback calls it")
        candidate = fit_image(rollout.render.png, self.image_size)
        pairs = []
        for ref in self.pool.draw(self.references, seed=rollout.seed, mix=self.mix):
            if ref.name not in self._reference_png:
                self._reference_png[ref.name] = fit_image(ref.png, self.image_size)
            reference = self._reference_png[ref.name]
            pairs += [(candidate, reference), (reference, candidate)]
        return pairs

    def compare(self, pairs: list[tuple[bytes, bytes]]) -> tuple[list[str | None], list[CallRecord]]:
        return self.backend.compare(pairs, self.prompt) if pairs else ([], [])

    def score_row(self, rollout: Rollout) -> tuple[list[str | None], list[CallRecord]]:
        return self.compare(self.pairs(rollout))

    async def ascore_row(self, rollout: Rollout) -> tuple[list[str | None], list[CallRecord]]:
        """`score_row` on the caller's event loop, for a backend with `acompare` (an HTTP judge)."""
        pairs = self.pairs(rollout)
        return await self.backend.acompare(pairs, self.prompt) if pairs else ([], [])

    @property
    def awaits(self) -> bool:
        """Whether a row's work is a coroutine (`ascore_row`) rather than a computation."""
        return hasattr(self.backend, "acompare")

    def score(self, rollouts: list[Rollout]) -> TermScores:
        """One backend call for the batch's pairs, so they run as concurrently as the backend lets them."""
        pairs = [self.pairs(r) for r in rollouts]
        verdicts, calls = self.compare([p for row in pairs for p in row])
        rows, at = [], 0
        for row in pairs:
            rows.append((verdicts[at:at + len(row)], calls[at:at + len(row)]))
            at += len(row)
        return self.combine(rows)

    def combine(self, rows: list[tuple[list[str | None], list[CallRecord]]]) -> TermScores:
        per_rollout: list[list[float]] = [[] for _ in rows]
        wins = resolved = first_wins = 0
        split = pairs = 0  # references whose two orders were both answered; of them, those the orders split
        for i, (verdicts, _) in enumerate(rows):
            for first, second in zip(verdicts[::2], verdicts[1::2]):
                for verdict, cand in ((first, "A"), (second, "B")):
                    if verdict is not None:
                        resolved += 1
                        wins += verdict == cand
                        first_wins += verdict == "A"
                s = reference_score(first, second)
                if s is not None:
                    per_rollout[i].append(s)
                    pairs += 1
                    split += s == 0.5
        scores = torch.tensor([sum(s) / len(s) if s else math.nan for s in per_rollout], dtype=torch.float32)
        m = summary_metrics(scores)
        calls = [c for _, row_calls in rows for c in row_calls]
        latencies = sorted(c.latency_s for c in calls)
        m.update({
            "win_rate": wins / resolved if resolved else math.nan,
            "first_position_rate": first_wins / resolved if resolved else math.nan,  # 0.5 = no position bias
            # a monitor: a judge that reads the picture's words as instructions, or answers by position, contradicts itself
            "order_disagreement": split / pairs if pairs else math.nan,
            "calls": float(len(calls)),
            "failures": float(sum(not c.ok for c in calls)),
            "retries": float(sum(c.attempts - 1 for c in calls)),
            "latency_mean_s": sum(latencies) / len(latencies) if latencies else math.nan,
            "latency_max_s": latencies[-1] if latencies else math.nan,
        })
        return TermScores(scores, m)
