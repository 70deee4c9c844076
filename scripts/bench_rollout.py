"""Time the default run's step on a CPU, phase by phase, for code trees and settings side by side.

A variant is `NAME=TREE[:key=value,...]`: TREE a checkout of the project (`.`: this one; a baseline:
`git archive REV | tar -x -C DIR`), run with TREE's configs/default.yaml (or `--config`) and the
overrides, dotted keys into its `model` section (values read as YAML):

    python scripts/bench_rollout.py --variants base=/tmp/base new=. new1t=.:threads.update=1 --repeats 4
    python scripts/bench_rollout.py --variants lean=. generate=.:sampling.lean_decode=false

Each variant is a worker process that imports TREE's package, builds the step's pieces as `fit` does
(policy, sampler, warm Chromium pool, reward terms, optimizer) and takes one warm-up step; then the
variants take turns, `--repeats` times, each step with the same seed and from the same policy (the
update is undone after it is timed), so the trees sample the same sketches unless their decoding
differs. The 2-core box these run on is shared: wall seconds are noisy, CPU seconds and ratios of
interleaved steps are the figures to read.

Per step: wall seconds of sampling, of the wait for the last renders after it, of scoring and of the
update; CPU seconds of the decoding thread, of the worker process, and of its Chromium processes;
tokens sampled; a hash of the sampled ids (the summary counts the steps that sampled what the first
variant did). Each step prints a JSON line; the last line is the summary, means per variant
and each variant's ratio to the first.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUBJECT = "a peach hibiscus"


def chromium_cpu_s(process) -> float:
    """CPU seconds of every descendant of `process` (Chromium under Playwright's driver), the ended ones too."""
    total = 0.0
    for child in process.children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except Exception:  # noqa: BLE001 - a page process that ended between listing and reading
            pass
    return total


def model_config(tree: Path, config: str | None, overrides: list[str]) -> dict:
    model = yaml.safe_load(Path(config or tree / "configs" / "default.yaml").read_text())["model"]
    for item in overrides:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = model
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = yaml.safe_load(value)
    policy = model["policy"]
    if not Path(policy["model"]).is_absolute():
        policy["model"] = str(tree / policy["model"])
    return model


def worker(tree: Path, config: str | None, overrides: list[str]) -> None:
    """Steps on request: a seed per line of stdin, a JSON line of figures per step on stdout."""
    import psutil
    import torch
    from transformers import get_scheduler

    from lit_watercolour import grpo
    from lit_watercolour.data import Prompt, chat_prompt
    from lit_watercolour.module import GRPOModule
    from lit_watercolour.rollout import RolloutPipeline
    from lit_watercolour.update import policy_update

    model = model_config(tree, config, overrides)
    rewards = []
    for term in model.pop("rewards"):
        module_name, _, name = term["class_path"].rpartition(".")
        rewards.append(getattr(importlib.import_module(module_name), name)(**term.get("init_args", {})))
    module = GRPOModule(rewards=rewards, **model)
    module.configure_model()
    for term in module.reward_mix.terms:  # as the RewardModels callback does
        term.setup(torch.device("cpu"))
    pipeline = RolloutPipeline(module.sampler, rewards=module.reward_mix, render=module.render_config,
                               pool_size=module.render_pool_size)
    policy, g, o = module.policy_model, module.grpo_config, module.optim_config
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas), eps=o.eps)
    scheduler = get_scheduler(o.lr_scheduler, optimizer, num_warmup_steps=o.warmup_steps)
    start_params = [p.detach().clone() for p in params]
    prompt = Prompt(SUBJECT, chat_prompt(module.tokenizer, SUBJECT), seed=0)
    me = psutil.Process()
    sample = module.sampler.sample
    decode_cpu = []

    def timed_sample(*args, **kwargs):
        if kwargs.get("generator") is not None:  # the step's seed, as torch.manual_seed gives a tree that samples
            kwargs["generator"].manual_seed(seed)  # from the global RNG: the trees draw the same sketches
        t0 = time.thread_time()
        batch = sample(*args, **kwargs)
        decode_cpu.append(time.thread_time() - t0)
        return batch

    module.sampler.sample = timed_sample
    try:
        for line in sys.stdin:
            seed = int(line)
            torch.manual_seed(seed)
            cpu0, chromium0, t0 = time.process_time(), chromium_cpu_s(me), time.perf_counter()
            batch = pipeline.collect([prompt], g.num_generations)
            advantages, _ = grpo.group_advantages(batch.rewards, g.num_generations, g.scale_rewards)
            t2 = time.perf_counter()
            policy_update(policy, batch.samples, advantages, g, module.sampling_config, o, optimizer, scheduler,
                          lambda loss: loss.backward())
            t3 = time.perf_counter()
            with torch.no_grad():  # every step starts from the same policy, so variants sample alike
                for p, p0 in zip(params, start_params):
                    p.copy_(p0)
            optimizer.state.clear()
            print(json.dumps({
                "seed": seed, "tokens": int(batch.samples.num_tokens.sum()),
                "sampling_s": batch.metrics["time/sampling_s"], "render_wait_s": batch.metrics["time/render_wait_s"],
                "scoring_s": batch.metrics["time/scoring_s"], "update_s": t3 - t2, "step_s": t3 - t0,
                "decode_cpu_s": decode_cpu[-1], "process_cpu_s": time.process_time() - cpu0,
                "chromium_cpu_s": chromium_cpu_s(me) - chromium0,
                "completions": hashlib.sha1(str(batch.samples.completion_ids.tolist()).encode()).hexdigest()[:12],
            }), flush=True)
    finally:
        pipeline.close()
        module.teardown("fit")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="+", default=["default=."], help="NAME=TREE[:key=value,...]")
    ap.add_argument("--config", default=None, help="default: each tree's configs/default.yaml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--overrides", nargs="*", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(Path(args.worker), args.config, args.overrides)

    workers = {}
    for variant in args.variants:
        name, _, spec = variant.partition("=")
        tree, _, overrides = spec.partition(":")
        tree = (ROOT / tree).resolve()
        # each tree's own worker: a baseline steps with its own code
        cmd = [sys.executable, str(tree / "scripts" / Path(__file__).name), "--worker", str(tree), "--overrides",
               *filter(None, overrides.split(","))]
        if args.config:
            cmd += ["--config", args.config]
        workers[name] = subprocess.Popen(cmd, cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def step(name: str, seed: int) -> dict:
        w = workers[name]
        w.stdin.write(f"{seed}\n")
        w.stdin.flush()
        line = w.stdout.readline()
        if not line:
            raise RuntimeError(f"variant {name} ended (exit status {w.wait()})")
        return json.loads(line)

    runs: dict[str, list[dict]] = {name: [] for name in workers}
    try:
        for name in workers:
            step(name, -1)  # warm-up: pages, kernels, allocator
        for repeat in range(args.repeats):
            for name in workers:
                row = step(name, repeat)
                runs[name].append(row)
                print(json.dumps({"variant": name, **{k: round(v, 3) if isinstance(v, float) else v
                                                       for k, v in row.items()}}), flush=True)
    finally:
        for w in workers.values():
            w.stdin.close()
            w.wait()
    keys = [k for k, v in runs[args.variants[0].partition("=")[0]][0].items() if isinstance(v, (int, float)) and k != "seed"]
    means = {name: {k: statistics.mean(r[k] for r in rows) for k in keys} for name, rows in runs.items()}
    first = next(iter(means.values()))
    summary = {name: {**{k: round(v, 3) for k, v in m.items()},
                      "ratio": {k: round(m[k] / first[k], 3) for k in keys if first[k]}} for name, m in means.items()}
    ids = {name: [r["completions"] for r in rows] for name, rows in runs.items()}
    same = {name: sum(a == b for a, b in zip(v, next(iter(ids.values())))) for name, v in ids.items()}
    print(json.dumps({"summary": summary, "same_completions_as_first": same, "repeats": args.repeats}), flush=True)


if __name__ == "__main__":
    main()
