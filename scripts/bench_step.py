"""Time one GRPO step's GPU side on a random-init model, and the same step in TRL's GRPOTrainer.

Phases: sampling (generate, then the sampler's own log-prob pass), the reference log-prob pass
(what beta > 0 adds), and the update (forward + backward over all rows, then the optimizer),
each with seconds and tokens/s, plus peak accelerator memory. It drives the trainer's pieces:
`lit_watercolour.policy.load_policy` (LoRA on all linear layers, gradient checkpointing), the
`hf` sampler, and the `lit_watercolour.grpo` advantages and loss.

Not measured: rendering and scoring. Rewards are random numbers (GPU nodes have no Chromium).
Completions are forced to full length (`min_new_tokens` = the length, EOS never ends a row), so
tokens/s figures compare like with like across runs and with TRL, whose generation gets the
same `min_new_tokens` through `generation_kwargs`. `--completions random` skips generation in
both (uniform random token ids of full length; TRL gets them through its `rollout_func` hook)
to time the update alone, where `generate` at long lengths would take most of a time budget.

The model is built from a config with random weights and saved to a temporary folder, so it is
loaded by the very code that loads a Hub checkpoint (`--model` takes a real one instead):

    python scripts/bench_step.py --preset qwen3-4b --completion-length 2048 --impls lit_watercolour trl
    python scripts/bench_step.py --arch qwen3 --hidden 2048 --layers 28 --completion-length 2048
    python scripts/bench_step.py --device cpu --preset tiny --completion-length 32 --dtype float32 --impls trl lit_watercolour

Each run prints a JSON line as it ends; the last line holds every figure: {"runs": [...]}.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path

import torch

from lit_watercolour import grpo
from lit_watercolour.data import chat_prompt
from lit_watercolour.policy import DTYPES, PolicyConfig, completion_logps, load_base_model, load_policy, load_tokenizer, model_class
from lit_watercolour.sampling import SampleBatch, SamplingConfig, build_sampler
from lit_watercolour.tiny_models import tiny_config, tiny_tokenizer

QWEN3_VOCAB = 151936
# Qwen3 dense shapes from the public model cards / configs; the MoE one is a small stand-in, not a release
PRESETS = {
    "tiny": dict(arch="qwen3", hidden=64, layers=2),
    "qwen3-1.7b": dict(arch="qwen3", hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128,
                       intermediate=6144, vocab=QWEN3_VOCAB, tie=True),
    "qwen3-4b": dict(arch="qwen3", hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128,
                     intermediate=9728, vocab=QWEN3_VOCAB, tie=True),
    "qwen3.5-moe-small": dict(arch="qwen3_5_moe", hidden=1024, layers=8, vocab=QWEN3_VOCAB),
}
PROMPT = "a peach hibiscus"


def model_config(spec: dict, tokenizer):
    """A transformers config: `tiny_config`'s shapes, or a dense Qwen3 with every dimension given."""
    vocab = spec.get("vocab") or len(tokenizer)  # ids past the tokenizer's decode to nothing: fine, nothing renders
    if "heads" in spec:
        from transformers import Qwen3Config

        cfg = Qwen3Config(vocab_size=vocab, hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
                          num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"],
                          head_dim=spec["head_dim"], intermediate_size=spec["intermediate"],
                          tie_word_embeddings=spec.get("tie", False), max_position_embeddings=40960)
    else:
        cfg = tiny_config(spec["arch"], vocab, hidden_size=spec["hidden"], num_layers=spec["layers"])
        for c in (cfg, getattr(cfg, "text_config", None)):
            if c is not None:
                c.max_position_embeddings = 40960
    for c in (cfg, getattr(cfg, "text_config", None)):
        if c is not None:
            c.eos_token_id, c.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    return cfg


def save_random_model(spec: dict, dtype: str, path: Path, device: torch.device) -> str:
    tokenizer = tiny_tokenizer()
    cfg = model_config(spec, tokenizer)
    torch.manual_seed(0)
    with device:  # random init of billions of weights: seconds on a GPU, minutes on its host's CPU
        model = model_class(cfg).from_config(cfg, dtype=DTYPES[dtype])
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


class Clock:
    """Wall-clock seconds summed per phase, the device synchronised at both ends."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.seconds = device, {}

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def wrap(self, phase: str, fn):
        def timed(*args, **kwargs):
            self.sync()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - t0
        return timed


def reset_memory(device: torch.device) -> None:
    gc.collect()  # the previous run's model and optimizer state
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gib(device: torch.device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None


def random_completions(tokenizer, n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """[n, length] token ids drawn uniformly from the tokenizer's ordinary tokens: no row ends early."""
    ordinary = torch.tensor(sorted(set(range(len(tokenizer))) - set(tokenizer.all_special_ids)))
    return ordinary[torch.randint(len(ordinary), (n, length), generator=generator)]


def random_batch(tokenizer, prompt: str, n: int, length: int, device: torch.device) -> SampleBatch:
    enc = tokenizer([prompt] * n, return_tensors="pt", add_special_tokens=False)
    ids = random_completions(tokenizer, n, length, torch.Generator().manual_seed(0))
    return SampleBatch(prompt_ids=enc.input_ids.to(device), prompt_mask=enc.attention_mask.to(device),
                       completion_ids=ids.to(device), completion_mask=torch.ones_like(ids, device=device),
                       texts=[""] * n, truncated=torch.ones(n, dtype=torch.bool), logps=torch.zeros(ids.shape, device=device),
                       groups=[0] * n)


def bench_ours(folder: str, args, length: int, device: torch.device) -> dict:
    cfg = PolicyConfig(model=folder, dtype=args.dtype, gradient_checkpointing=True, lora_r=args.lora_r,
                       lora_alpha=2 * args.lora_r, attn_implementation=args.attn_implementation)
    model, tokenizer = load_policy(cfg)
    model.to(device)
    G, mb = args.num_generations, args.micro_batch_size
    sampling = SamplingConfig(temperature=1.0, max_completion_length=length, generation_batch_size=G, logprob_batch_size=mb)
    sampler = build_sampler("hf", model, tokenizer, sampling)
    prompt = chat_prompt(tokenizer, PROMPT)
    warm_up = SamplingConfig(max_completion_length=8, generation_batch_size=G, logprob_batch_size=mb)
    build_sampler("hf", model, tokenizer, warm_up).sample([prompt], G)  # kernels, allocator, cuBLAS handles
    model.get_base_model().generation_config.min_new_tokens = length  # full-length completions: EOS cannot end a row
    clock = Clock(device)
    model.generate = clock.wrap("generate", model.generate)  # the sampler's generate calls, timed apart from its log-probs
    reset_memory(device)

    if args.completions == "random":
        batch = random_batch(tokenizer, prompt, G, length, device)
    else:
        batch = clock.wrap("sampling", sampler.sample)([prompt], G)
        clock.seconds["sampling_logps"] = clock.seconds["sampling"] - clock.seconds["generate"]
    args_ = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask, sampling.temperature, mb)

    def reference_logps():
        with torch.no_grad(), model.disable_adapter():
            return completion_logps(model, *args_)[0]

    clock.wrap("ref_logps", reference_logps)()
    sampling_peak = peak_memory_gib(device)
    reset_memory(device)

    rewards = torch.rand(G)  # synthetic: no rendering here
    advantages, _ = grpo.group_advantages(rewards, G, "group")
    advantages = advantages.to(device)
    mask = batch.completion_mask.float()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)

    def forward_backward():
        model.train()
        for lo in range(0, G, mb):
            sl = slice(lo, lo + mb)
            logps, _ = completion_logps(model, batch.prompt_ids[sl], batch.prompt_mask[sl], batch.completion_ids[sl],
                                        batch.completion_mask[sl], sampling.temperature, mb)
            loss, _ = grpo.grpo_loss(logps, advantages[sl], mask[sl], loss_type="dapo", num_items_in_batch=mask.sum())
            loss.backward()

    def optimizer_step():
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    clock.wrap("update_fwd_bwd", forward_backward)()
    clock.wrap("optimizer", optimizer_step)()
    completion_tokens = int(batch.completion_mask.sum())
    all_tokens = completion_tokens + int(batch.prompt_mask.sum())
    s = clock.seconds
    sampled = {} if args.completions == "random" else {
        "sampling_s": s["generate"], "sampling_tokens_per_s": completion_tokens / s["generate"],
        "sampling_logps_s": s["sampling_logps"], "sampling_logps_tokens_per_s": all_tokens / max(s["sampling_logps"], 1e-9),
    }
    out = {
        "impl": "lit_watercolour", "completion_length": length, "prompt_tokens": int(batch.prompt_mask[0].sum()),
        "completion_tokens": completion_tokens, **sampled,
        "ref_logps_s": s["ref_logps"], "ref_logps_tokens_per_s": all_tokens / s["ref_logps"],
        "update_fwd_bwd_s": s["update_fwd_bwd"], "update_tokens_per_s": all_tokens / s["update_fwd_bwd"],
        "optimizer_s": s["optimizer"], "peak_memory_sampling_gib": sampling_peak,
        "peak_memory_update_gib": peak_memory_gib(device),
    }
    del model, sampler, optimizer, batch
    return out


def bench_trl(folder: str, args, length: int, device: torch.device, out_dir: str) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cfg = PolicyConfig(model=folder, dtype=args.dtype, attn_implementation=args.attn_implementation)
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg, tokenizer)
    G, mb = args.num_generations, args.micro_batch_size
    clock = Clock(device)

    class OptimizerClock(TrainerCallback):
        def on_pre_optimizer_step(self, *a, **k):
            clock.sync()
            self.t0 = time.perf_counter()

        def on_optimizer_step(self, *a, **k):
            clock.sync()
            clock.seconds["optimizer"] = time.perf_counter() - self.t0

    config = GRPOConfig(
        output_dir=out_dir, max_steps=1, per_device_train_batch_size=mb, gradient_accumulation_steps=G // mb,
        num_generations=G, max_completion_length=length, temperature=1.0, learning_rate=1e-5, beta=0.0,
        loss_type="dapo", scale_rewards="group", gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False}, bf16=args.dtype == "bfloat16",
        use_vllm=False, report_to=[], save_strategy="no", logging_steps=1, use_cpu=device.type == "cpu",
        generation_kwargs={"min_new_tokens": length}, max_grad_norm=1.0, disable_tqdm=True,
    )
    generator = torch.Generator().manual_seed(0)

    def random_rollout(prompts: list[str], trainer) -> dict:  # TRL's hook for custom generation
        ids = random_completions(tokenizer, len(prompts), length, generator)
        return {"prompt_ids": tokenizer(prompts, add_special_tokens=False).input_ids, "completion_ids": ids.tolist(),
                "logprobs": None}

    trainer = GRPOTrainer(
        model=model, reward_funcs=lambda completions, **kw: torch.rand(len(completions)).tolist(), args=config,
        rollout_func=random_rollout if args.completions == "random" else None,
        train_dataset=Dataset.from_dict({"prompt": [chat_prompt(tokenizer, PROMPT)]}), processing_class=tokenizer,
        peft_config=LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, target_modules="all-linear", task_type="CAUSAL_LM"),
        callbacks=[OptimizerClock()],
    )
    trainer._generate = clock.wrap("generate", trainer._generate)  # with --completions random: the hook, not timed below
    trainer._generate_and_score_completions = clock.wrap("generate_and_score", trainer._generate_and_score_completions)
    trainer.training_step = clock.wrap("training_step", trainer.training_step)
    reset_memory(device)
    clock.wrap("total", trainer.train)()
    s = clock.seconds
    completion_tokens = G * length  # min_new_tokens = max_new_tokens
    all_tokens = completion_tokens + G * len(tokenizer(chat_prompt(tokenizer, PROMPT), add_special_tokens=False).input_ids)
    sampled = {} if args.completions == "random" else {
        "sampling_s": s["generate"], "sampling_tokens_per_s": completion_tokens / s["generate"]}
    out = {
        "impl": "trl", "completion_length": length, "completion_tokens": completion_tokens, **sampled,
        # TRL skips the sampling-policy pass on-policy (num_iterations 1, no vLLM) and the reference one at beta 0
        "prepare_s": s["generate_and_score"] - s["generate"],
        "update_fwd_bwd_s": s["training_step"] - s["generate_and_score"],
        "update_tokens_per_s": all_tokens / (s["training_step"] - s["generate_and_score"]),
        "optimizer_s": s.get("optimizer"), "total_s": s["total"], "peak_memory_gib": peak_memory_gib(device),
    }
    del trainer, model
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default=None)
    ap.add_argument("--arch", default="qwen3", help="qwen3 | qwen3_moe | qwen3_5_moe, sized by --hidden/--layers")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--model", default=None, help="a Hub id or transformers folder instead of a random-init model")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    ap.add_argument("--attn-implementation", default=None, help="e.g. sdpa, flash_attention_2; None: transformers' choice")
    ap.add_argument("--completion-length", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--num-generations", type=int, default=8)
    ap.add_argument("--micro-batch-size", type=int, default=8, help="rows per forward/backward (TRL's per_device_train_batch_size)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--completions", choices=["generate", "random"], default="generate",
                    help="random: full-length random token ids instead of sampling, to time the update alone")
    ap.add_argument("--impls", nargs="+", choices=["lit_watercolour", "trl"], default=["lit_watercolour"],
                    help="run in this order: trl is one step of TRL's GRPOTrainer with the same settings "
                         "(swap the order to check that running second is no advantage)")
    args = ap.parse_args()
    if args.num_generations % args.micro_batch_size:
        ap.error("--num-generations must be a multiple of --micro-batch-size")
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # the Trainer places TRL's model on the current device
    spec = PRESETS[args.preset] if args.preset else dict(arch=args.arch, hidden=args.hidden, layers=args.layers)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
        folder = args.model or save_random_model(spec, args.dtype, Path(tmp) / "model", device)
        for length in args.completion_length:
            benches = {"lit_watercolour": lambda: bench_ours(folder, args, length, device),
                       "trl": lambda: bench_trl(folder, args, length, device, str(Path(tmp) / "trl"))}
            by_impl = {}
            for name in args.impls:
                run = benches[name]
                torch.manual_seed(0)
                try:
                    figures = run()
                except torch.OutOfMemoryError as e:  # a figure in itself; the other implementation still runs
                    figures = {"impl": name, "completion_length": length, "error": f"out of memory: {str(e)[:200]}"}
                result = {"model": args.model or args.preset or f"{args.arch}-{args.hidden}x{args.layers}",
                          "device": str(device), "dtype": args.dtype, "num_generations": args.num_generations,
                          "micro_batch_size": args.micro_batch_size, "completions": args.completions, **figures}
                result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
                runs.append(result)
                by_impl[name] = result
                print(json.dumps(result), flush=True)
                reset_memory(device)
            if len(by_impl) == 2:  # side by side: TRL's seconds over ours, per phase
                ours, trl = by_impl["lit_watercolour"], by_impl["trl"]
                ratios = {f"trl_over_ours/{k}": round(trl[k] / ours[k], 3)
                          for k in ("sampling_s", "update_fwd_bwd_s", "optimizer_s") if trl.get(k) and ours.get(k)}
                runs.append({"completion_length": length, **ratios})
                print(json.dumps(runs[-1]), flush=True)
    print(json.dumps({"runs": runs}), flush=True)


if __name__ == "__main__":
    main()
