"""The rehearsal script end to end on a CPU, at the recipe's vocabulary and layer pattern scaled down:
its judge over loopback HTTP, HPSv3's stand-in, real renders, and the report file a cut run keeps."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import rehearse_recipe  # noqa: E402

# a hang guard, not a bound: a one-step rehearsal on a loaded 2-core box outlasts the default timeout
pytestmark = pytest.mark.timeout(900)


def test_stale_rehearsal_reports_build_steps_busy_idle_and_summary_as_they_happen(tmp_path):
    """One rehearsal covers both reports: the recipe's shapes, 2 steps with max_staleness 1 (the first on-policy)."""
    summary = rehearse_recipe.main(["--device", "cpu", "--tiny", "--policy-shapes", "recipe", "--steps", "2",
                                    "--completion-length", "8", "--render-pages", "2", "--max-staleness", "1",
                                    "--sampler", "hf", "--out", str(tmp_path)])
    lines = [json.loads(line) for line in (tmp_path / rehearse_recipe.LINES_FILE).read_text().splitlines()]
    setup, built, *steps, last = lines
    assert setup["policy"]["vocab_size"] == 248320 and setup["policy"]["layer_types"][-1] == "full_attention"
    assert setup["linear_attention"].keys() == {"fla", "causal_conv1d"} and "SwiftShader" in setup["webgl_renderer"]
    assert built["policy_parameters"] == summary["policy_parameters"] > 248320 * 64 * 2  # embeddings and LM head
    assert 0 < built["trainable_parameters"] == summary["trainable_parameters"] < built["policy_parameters"] / 100
    assert [s["step"] for s in steps] == [1, 2]
    for step in steps:
        assert step["completion_tokens_mean"] == 8 and step["decode_path"] == "generate"  # no CUDA
        for key in ("sampling_s", "render_wait_s", "score_gate_s", "score_length_s", "score_judge_s", "score_hpsv3_s",
                    "update_s", "step_s"):
            assert step[f"time/{key}"] >= 0, key
        assert step["gate_reasons"] == {"ok": 8} and step["judge_calls"] == 64 and step["judge_failures"] == 0
    assert last == {"summary": summary} and summary["judge_requests"] == 2 * 64  # 8 rollouts x 4 references x 2 orders a step

    assert [s["staleness"] for s in steps] == [0.0, 1.0]  # the first step on-policy, the second one behind
    assert steps[1]["time/at/sampling_end_s"] <= steps[0]["time/at/update_start_s"]  # sampled before update 1
    # step 2's batch was sampled in step 1's window, and the last step prefetches nothing: it samples no time
    assert steps[0]["time/busy/sampling_s"] > 0 and steps[1]["time/busy/sampling_s"] == 0.0
    for s in steps:  # the update is one span inside its step's window: its busy time is that span
        assert s["time/busy/update_s"] == pytest.approx(s["time/at/update_end_s"] - s["time/at/update_start_s"], abs=2e-3)
