"""CUDA-graphed decoding for Qwen3.5-MoE policies: one graph replay a token instead of `generate`'s Python.

`generate` on a Qwen3.5-MoE model is launch-bound: every token runs thousands of small kernels
(three Gated DeltaNet layers per attention layer, routed and shared experts, LoRA on every linear)
from Python, with a cache that grows. Here the prompt fills a transformers `StaticCache` (fixed
addresses: the linear-attention conv and recurrent states, and full-attention keys and values over
the whole length), then one decoding step (sample from the last logits, write the token, run the
model's own text stack on it with a precomputed attention mask, keep the new logits) is captured
once as a CUDA graph and replayed for every later token. All step state lives in device tensors
the graph updates itself: the token count, positions, the attention mask, which rows have ended.

A prompt with an image in it (a render shown to a vision-language policy) is prefilled by the
multimodal model (`image_prefill`: the vision tower's embeddings merged in, M-RoPE's positions); its
decoded tokens are text, so the same captured step decodes it.

The same step runs eagerly where no capture is possible (CPU, or a failed capture, whose reason is
kept in `path`): `tests/test_graph_decoding.py` checks it token for token against `generate`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from lit_watercolour.decoding import _core

GRAPH_MODEL_TYPES = ("qwen3_5_moe", "qwen3_5_moe_text")
TORCH_DIR = str(Path(torch.__file__).parent) + "/"  # frames in here (module calls, `torch.cuda.graph`) name no cause


def supports(model: torch.nn.Module) -> bool:
    """Architectures the captured step was checked against, with an attention kind it masks for."""
    config = _core(model).config.get_text_config()
    return config.model_type in GRAPH_MODEL_TYPES and config._attn_implementation in ("sdpa", "eager")


class GraphDecoder:
    """Decodes with the policy's own modules (adapter applied) through a static cache; build one per
    `sample` call. `capture`: None captures on CUDA only. `generator`: the one `generate`'s `sample` draws from (None:
    torch's global one), registered with the captured step so that each replay draws anew from it."""

    def __init__(self, model: torch.nn.Module, capture: bool | None = None, generator: torch.Generator | None = None) -> None:
        core = _core(model)
        self.model = core.model  # a vision-language policy's: the vision tower and the text stack
        self.text_model = getattr(core.model, "language_model", core.model)
        self.head = core.get_output_embeddings()
        self.config = core.config.get_text_config()
        self.min_new_tokens = core.generation_config.min_new_tokens or 0
        device = next(model.parameters()).device
        self.capture = device.type == "cuda" if capture is None else capture
        self.path = "not run"  # after `generate`: "cuda-graph", or "eager" and why
        self.generator = generator

    def _mask(self, valid: Tensor, dtype: torch.dtype) -> Tensor:
        """valid [B, L] keys -> the [B, 1, 1, L] mask the model's attention takes (sdpa: bool; eager: additive)."""
        if self.config._attn_implementation == "sdpa":
            return valid[:, None, None, :]
        additive = torch.zeros(valid.shape, dtype=dtype, device=valid.device).masked_fill(~valid, torch.finfo(dtype).min)
        return additive[:, None, None, :]

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Tensor,
        prompt_mask: Tensor,
        max_new_tokens: int,
        sample: Callable[[Tensor], Tensor],
        stop_ids: list[int],
        pad_id: int,
        on_step: Callable[[Tensor], None] | None = None,
        temperature: float = 1.0,
        images: dict | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Completion ids [B, <=max_new_tokens] after left-padded prompts and each token's log-prob
        under softmax(logits / temperature), as `LeanDecoder.generate`: a row that has ended is padded
        with `pad_id`; `on_step(prompt and completion ids so far)` runs after every token. Stop tokens are masked
        for the first `generation_config.min_new_tokens`. `images`: the prompts' image arguments
        (`vision.image_inputs`; empty or None: text only)."""
        from transformers import StaticCache

        B, P = prompt_ids.shape
        total, device = P + max_new_tokens, prompt_ids.device
        cache = StaticCache(config=self.config, max_cache_len=total)
        positions = (prompt_mask.cumsum(1) - 1).clamp(min=0)  # left padding: each row counts from its first token
        if images:
            hidden, positions = image_prefill(self.model, prompt_ids, prompt_mask, positions, images, cache)
        else:
            hidden = self.text_model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions,
                                     past_key_values=cache, use_cache=True).last_hidden_state
        logits = self.head(hidden[:, -1]).float()

        out = torch.full((B, total), pad_id, dtype=torch.long, device=device)
        out[:, :P] = prompt_ids
        logps = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=device)
        valid = torch.zeros(B, total, dtype=torch.bool, device=device)
        valid[:, :P] = prompt_mask.bool()
        position = positions[..., -1:].clone()  # [B, 1], or [4, B, 1] after an image: every axis advances by one
        made = torch.zeros((), dtype=torch.long, device=device)  # tokens written so far
        done = torch.zeros(B, dtype=torch.bool, device=device)
        stop = torch.tensor(stop_ids, device=device)
        is_stop = torch.zeros(logits.shape[-1], dtype=torch.bool, device=device)
        is_stop[stop[stop < logits.shape[-1]]] = True
        no_linear_mask = {"linear_attention": None}  # decoded tokens are never padding

        def step() -> None:
            early = is_stop & (made < self.min_new_tokens)
            token = sample(logits.masked_fill(early, float("-inf"))).masked_fill(done, pad_id)
            column = (made + P).view(1)
            out.index_copy_(1, column, token[:, None])
            logps.index_copy_(1, made.view(1), (logits / temperature).log_softmax(-1).gather(-1, token[:, None]))
            done.logical_or_(torch.isin(token, stop))
            valid.index_fill_(1, column, True)
            position.add_(1)
            made.add_(1)
            mask = {"full_attention": self._mask(valid, hidden.dtype), **no_linear_mask}
            h = self.text_model(input_ids=token[:, None], attention_mask=mask, position_ids=position,
                                past_key_values=cache, use_cache=True).last_hidden_state
            logits.copy_(self.head(h[:, -1]).float())

        run = step
        self.path = "eager"
        steps = 0
        while True:
            if self.capture and steps == 0:
                self._on_side_stream(step)  # a real first step that also warms every kernel up off the capture
            else:
                if self.capture and steps == 1:
                    run, self.path = self._captured(step, self.generator)
                run()
            steps += 1
            if on_step is not None:
                on_step(out[:, : P + steps])
            if steps == max_new_tokens or bool(done.all()):
                break
        return out[:, P : P + steps], logps[:, :steps]

    @staticmethod
    def _on_side_stream(step: Callable[[], None]) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)

    @staticmethod
    def _captured(step: Callable[[], None], generator: torch.Generator | None = None) -> tuple[Callable[[], None], str]:
        """`step` as a CUDA graph's replay, or `step` itself and why capturing it failed."""
        graph = torch.cuda.CUDAGraph()
        if generator is not None:  # the default generator is registered by the capture itself
            graph.register_generator_state(generator)
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # the render and judge threads may use CUDA
                step()  # recorded, not run: the step's tensors change only on replay
        except Exception as error:  # noqa: BLE001 - any capture failure leaves eager decoding, which is correct
            torch.cuda.synchronize()
            # a capture that fails never ends the RNG's capture mode, and eager sampling would then refuse to draw;
            # a clone of its state keeps seed and offset but not that mode
            for g in [torch.cuda.default_generators[torch.cuda.current_device()], generator]:
                if g is not None:
                    g.graphsafe_set_state(g.clone_state())
            return step, f"eager (capture failed: {capture_failure(error)})"
        return graph.replay, "cuda-graph"


def capture_failure(error: BaseException) -> str:
    """Why a capture failed: its first error, at the innermost line outside torch that raised it. Ending a capture
    that a call in it broke raises again, in torch, while the call's error is handled ("operation failed due to a
    previous error during capture"), so an error that torch's own code raised over another gives way to that one."""
    while error.__context__ is not None and raised_in_torch(error):
        error = error.__context__
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(TORCH_DIR)]
    where = ""
    if frames:
        where = f" at {'/'.join(Path(frames[-1].filename).parts[-2:])}:{frames[-1].lineno} in {frames[-1].name}"
    message = (str(error).strip().splitlines() or [""])[0]  # CUDA errors go on with advice on how to debug them
    return f"{type(error).__name__}{where}: {message[:300]}"


def raised_in_torch(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(TORCH_DIR)


def image_prefill(model: torch.nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, positions: Tensor, images: dict,
                  cache) -> tuple[Tensor, Tensor]:
    """Left-padded prompts with images in them through the multimodal `model` into `cache`: their last hidden
    states and positions [4, B, P], the text's `positions` and then M-RoPE's time, height and width, as
    `generate` builds them (so the decoding steps, text tokens only, add one to every axis of the last column)."""
    rope, _ = model.get_rope_index(prompt_ids, images["mm_token_type_ids"], images["image_grid_thw"],
                                   attention_mask=prompt_mask)
    positions = torch.cat([positions[None], rope])
    hidden = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions, past_key_values=cache,
                   use_cache=True, **images).last_hidden_state
    return hidden, positions
