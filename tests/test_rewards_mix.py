import math

import pytest
import torch

from lit_watercolour.records import GateResult, Rollout
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.rewards.length import LengthTerm, code_text, code_tokens, length_curve
from lit_watercolour.gate import REASONS
from lit_watercolour.rewards.base import RewardTerm
from lit_watercolour.rewards.mix import RewardMix, gate_monitors, mix_rewards


def test_mix_weights_passed_and_nan():
    scores = {"gate": torch.tensor([1.0, 0.0, 1.0]), "judge": torch.tensor([0.5, 0.0, math.nan])}
    r = mix_rewards(scores, {"gate": 0.05, "judge": 0.6}, torch.tensor([True, False, True]))
    assert r[0].item() == pytest.approx(0.05 + 0.3)
    assert r[1].item() == 0.0  # gate failed: 0 whatever the other terms say
    assert math.isnan(r[2].item())  # a missing judge score is not a zero painting
    with pytest.raises(KeyError):
        mix_rewards(scores, {"gate": 0.05}, torch.tensor([True, True, True]))


def test_length_counts_code_not_comments():
    code = 'let a = "http://x"; // a comment\n/* block\n comment */\n\n   brush.circle(1,   2, 3);'
    assert code_text(code) == 'let a = "http://x"; brush.circle(1, 2, 3);'
    padded = "brush.circle(1, 2, 3);\n" + "// padding padding padding\n" * 500
    assert code_tokens(padded) == code_tokens("brush.circle(1, 2, 3);")


def test_length_curve_shape():
    assert length_curve(149) == 0.0 and length_curve(6001) == 0.0
    assert length_curve(150) == 0.0 and length_curve(3000) == 1.0 and length_curve(6000) == 1.0
    assert length_curve(1575) == pytest.approx(0.5)
    ramp = [length_curve(t) for t in range(150, 3001, 50)]
    assert all(b > a for a, b in zip(ramp, ramp[1:]))  # strictly rising: no plateau inside the ramp


def test_length_term_scores_and_metrics():
    stmt = "brush.circle(100, 120, 30);\n"  # 28 chars with the collapsed newline -> 7 tokens each
    rollouts = [Rollout("p", "", 0, 0, code=stmt * n) for n in (10, 200, 350, 2000)]
    s = LengthTerm().score(rollouts).values
    assert s.dtype == torch.float32 and s.shape == (4,)
    assert s[0] == 0 and 0 < s[1] < s[2] < 1 and s[3] == 0
    with pytest.raises(ValueError):
        LengthTerm(min_tokens=3000, full_tokens=150)


def test_gate_term_reasons():
    gates = [GateResult(True, "ok"), GateResult(False, "blank_canvas"), GateResult(False, "blank_canvas"),
             GateResult(False, "runtime_error")]
    term = GateTerm()
    s, metrics = term.score([Rollout("p", "", 0, 0, gate=g) for g in gates])
    assert s.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert term.weight == 0.05 and term.name == "gate"
    assert metrics["pass_rate"] == 0.25
    assert {g.reason for g in gates} <= set(REASONS)


def test_the_mix_logs_every_gate_reason_and_the_text_hits():
    """Reward-hacking monitors: each reason's share of the step (every reason a column, zero or not) and the
    count of verdicts the text check refused."""
    gates = [GateResult(True, "ok"), GateResult(False, "text"), GateResult(False, "text"), GateResult(False, "timeout")]
    rollouts = [Rollout("p", "", 0, 0, code="", gate=g) for g in gates]
    mix = RewardMix([GateTerm()])
    _, _, metrics = mix.mix(rollouts, {"gate": mix.score_term(mix.terms[0], rollouts)})
    assert metrics["gate/text_hits"] == 2.0
    assert metrics["gate/reason_ok"] == 0.25 and metrics["gate/reason_text"] == 0.5 and metrics["gate/reason_timeout"] == 0.25
    assert {f"gate/reason_{name}" for name in REASONS} <= set(metrics)
    assert sum(v for k, v in metrics.items() if k.startswith("gate/reason_")) == pytest.approx(1.0)
    assert gate_monitors([Rollout("p", "", 0, 0, gate=GateResult(True, "ok"))])["gate/text_hits"] == 0.0


class Parts(RewardTerm):
    """A term that tells its parts, not its score."""

    name = "parts"

    def feedback(self, rollout, score):
        return {"edges": 0.25, "tone": 0.75}


def test_feedback_tells_each_terms_numbers_for_the_rows_it_scored():
    """Turn 2's numbers come from every term, not one class: the default is the term's score; a gated term says
    nothing of a sketch that failed the gate; a missing score (NaN) is not shown; the gate's own line says the rest."""
    rollouts = [Rollout("p", "", 0, 0, gate=GateResult(True, "ok")), Rollout("p", "", 0, 0, gate=GateResult(False, "no_code")),
                Rollout("p", "", 0, 0, gate=GateResult(True, "ok"))]
    ungated = LengthTerm(0.1)
    ungated.gated = False
    mix = RewardMix([GateTerm(0.1), Parts(0.4), ungated])
    scores = {"gate": torch.tensor([1.0, 0.0, 1.0]), "parts": torch.tensor([0.5, 0.0, 0.5]),
              "length": torch.tensor([0.25, 0.5, math.nan])}
    assert mix.feedback(rollouts, scores) == [{"edges": 0.25, "tone": 0.75, "length": 0.25}, {"length": 0.5},
                                              {"edges": 0.25, "tone": 0.75}]
