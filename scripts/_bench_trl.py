"""TRL's GRPOTrainer timed as scripts/bench_step.py times ours: the same model folder, LoRA, loss and rows,
each optimizer step's forward/backward and optimizer seconds with generation and scoring taken out."""

from __future__ import annotations

import contextlib
import statistics
import time

import torch
from _bench_models import PROMPT, random_completions
from _bench_timing import Clock, peak_memory_gib, profiled, reset_memory, update_figures

from lit_watercolour.data import chat_prompt
from lit_watercolour.flops import update_flops
from lit_watercolour.policy import PolicyConfig, load_base_model, load_tokenizer

TRL_MICRO_BATCH = 8  # TRL's per_device_train_batch_size in every comparison here: one group a forward


def bench_trl(folder: str, args, length: int, device: torch.device, v, out_dir: str) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    cfg = PolicyConfig(model=folder, dtype=args.dtype, attn_implementation=args.attn_implementation)
    tokenizer = load_tokenizer(cfg)
    model = load_base_model(cfg, tokenizer)
    G = args.num_generations
    mb = min(v.mb or args.micro_batch_size or TRL_MICRO_BATCH, G)
    clock = Clock(device)
    steps: list[dict] = []
    profiler = contextlib.ExitStack()

    class StepClock(TrainerCallback):
        """Each optimizer step's seconds (forward/backward, clipping, optimizer), TRL's generation and
        scoring (inside its first training_step) taken out; the step after the timed ones is profiled."""

        def on_step_begin(self, args_, state, *a, **k):
            if (v.profile or args.profile) and state.global_step == 1 + args.repeats:
                profiler.enter_context(profiled(device, v.profile or args.profile))
            clock.sync()
            clock.seconds, self.t0 = {}, time.perf_counter()

        def on_step_end(self, args_, state, *a, **k):
            clock.sync()
            s = clock.seconds
            fwd_bwd = s["training_step"] - s["generate_and_score"]
            steps.append({"fwd_bwd": fwd_bwd, "gen": s.get("generate", 0.0),
                          "optimizer": time.perf_counter() - self.t0 - s["training_step"]})
            if state.global_step == 1:  # the warm-up step is over: peak memory from here on
                reset_memory(device)
            profiler.close()

    config = GRPOConfig(
        output_dir=out_dir, max_steps=1 + args.repeats + bool(v.profile or args.profile), per_device_train_batch_size=mb, gradient_accumulation_steps=G // mb,
        num_generations=G, max_completion_length=length, temperature=1.0, learning_rate=1e-5, beta=0.0,
        loss_type="dapo", scale_rewards="group", gradient_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False}, bf16=args.dtype == "bfloat16",
        use_vllm=False, report_to=[], save_strategy="no", logging_steps=1, use_cpu=device.type == "cpu",
        generation_kwargs={"min_new_tokens": length}, max_grad_norm=1.0, disable_tqdm=True,
        use_liger_kernel=bool(v.liger),
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
        callbacks=[StepClock()],
    )
    trainer._generate = clock.wrap("generate", trainer._generate)  # with --completions random: the hook
    trainer._generate_and_score_completions = clock.wrap("generate_and_score", trainer._generate_and_score_completions)
    trainer.training_step = clock.wrap("training_step", trainer.training_step)
    reset_memory(device)
    trainer.train()
    peak = peak_memory_gib(device)  # of the timed steps (and the profiled one, which adds no tensors)
    timed = steps[1:1 + args.repeats]
    first_step_s = steps[0]["fwd_bwd"] + steps[0]["optimizer"]  # its warm-up: kernels, the fla kernels' autotuning
    prompt_len = len(tokenizer(chat_prompt(tokenizer, PROMPT), add_special_tokens=False).input_ids)
    completion_tokens = G * length  # min_new_tokens = max_new_tokens
    all_tokens = completion_tokens + G * prompt_len
    fwd_bwd = [s["fwd_bwd"] for s in timed]
    optimizer = [s["optimizer"] for s in timed]
    gen = statistics.mean(s["gen"] for s in timed)
    sampled = {} if args.completions == "random" else {"sampling_s": gen, "sampling_tokens_per_s": completion_tokens / gen}
    out = {
        "impl": "trl", "completion_length": length, "completion_tokens": completion_tokens, **sampled,
        **update_figures(fwd_bwd, optimizer, all_tokens, update_flops(trainer.model, G, prompt_len + length),
                         args.peak_tflops),
        "micro_batch_size": mb, "peak_memory_update_gib": peak, "first_step_s": first_step_s,
    }
    del trainer, model
    return out
