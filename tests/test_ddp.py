"""The GRPO loop under Lightning's DDP on 2 CPU processes (gloo): the default tiny policy, real
renders, a group of 4 spread as 2 rows per rank. The ranks must draw different rows, agree on
the gathered group, and end with identical adapters that moved (DDP averaged the gradients)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from lit_watercolour import grpo

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(2400)  # a hang guard, above the fits' own: a loaded box reaches tighter ones


def test_ddp_two_cpu_ranks_share_groups_and_stay_in_sync(tmp_path):
    """One step stale over 3 steps: step 1 takes the on-policy path (nothing prefetched, no old log-probs), steps
    2 and 3 the stale one, so one fit covers both under DDP."""
    steps, max_staleness = 3, 1
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    config["model"]["policy"]["model"] = str(ROOT / "lit_watercolour" / "assets" / "tiny_policy")
    config["model"]["grpo"].update(num_generations=4, micro_batch_size=2)
    config["model"].update(render_pool_size=1, max_staleness=max_staleness)
    config["trainer"].update(devices=2, strategy="ddp", max_steps=steps, enable_progress_bar=False,
                             default_root_dir=str(tmp_path / "run"))
    config["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "run")
    config["trainer"]["callbacks"] = [c for c in config["trainer"]["callbacks"] if "checkpoint" not in c["class_path"]
                                      and "gallery" not in c["class_path"]]
    config["trainer"]["callbacks"].append({"class_path": "ddp_probe.RankProbe", "init_args": {"out_dir": str(tmp_path)}})
    (tmp_path / "ddp.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), OMP_NUM_THREADS="1")
    fit = subprocess.run([sys.executable, "-m", "lit_watercolour", "fit", "--config", str(tmp_path / "ddp.yaml")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)  # a hang guard
    assert fit.returncode == 0, fit.stderr[-4000:]

    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    assert [r["world"] for r in ranks] == [2, 2]
    for step in range(steps):
        zero, one = ranks[0]["steps"][step], ranks[1]["steps"][step]
        assert len(zero["completions"]) == len(one["completions"]) == 2  # half of the group each
        assert zero["completions"] != one["completions"]  # different draws of the same prompt
        # both ranks computed advantages from the same whole group: rank 0's rows, then rank 1's
        torch.testing.assert_close(zero["group_rewards"], one["group_rewards"], equal_nan=True)
        torch.testing.assert_close(zero["group_rewards"], torch.cat([zero["rewards"], one["rewards"]]), equal_nan=True)
    for name, final in ranks[0]["final"].items():
        torch.testing.assert_close(final, ranks[1]["final"][name], atol=0, rtol=0)  # DDP kept them identical
    assert any(not torch.equal(ranks[0]["final"][k], ranks[0]["initial"][k]) for k in ranks[0]["final"])
    log = [json.loads(line) for line in (tmp_path / "run" / "default" / "rollouts.jsonl").read_text().splitlines()]
    assert len(log) == steps * 4  # every rank's rows, each step once
    # the sampling weights' update count: step 1 on-policy, step 2 sampled before update 1, step 3 after it
    assert {r["step"]: r["policy_version"] for r in log} == {1: 0, 2: 0, 3: 1}


def test_groups_spread_over_ranks_round_trip():
    P, W, k = 3, 4, 2  # 3 groups of 8, 2 rows per rank
    G = W * k
    whole = torch.arange(P * G, dtype=torch.float32)  # group-major: group p is rows p*G .. p*G+G-1
    # rank r sampled generations r*k .. r*k+k-1 of every group, group-major on the rank
    per_rank = torch.stack([torch.cat([whole[p * G + r * k: p * G + r * k + k] for p in range(P)]) for r in range(W)])
    torch.testing.assert_close(grpo.groups_from_ranks(per_rank, P), whole)
    for r in range(W):
        torch.testing.assert_close(grpo.rows_of_rank(whole, P, W, r), per_rank[r])
    # gathered advantages equal a single process's over the same groups
    rewards = torch.rand(P * G)
    single, _ = grpo.group_advantages(rewards, G, "group")
    spread = torch.stack([grpo.rows_of_rank(rewards, P, W, r) for r in range(W)])
    gathered, _ = grpo.group_advantages(grpo.groups_from_ranks(spread, P), G, "group")
    torch.testing.assert_close(gathered, single)
