"""Judge backend (b): an in-process transformers vision-language model (Qwen2-VL, Qwen3-VL, Qwen3-VL-MoE).

The verdict is read from the logits of the first generated position: "A" if logit("A") >
logit("B"), else "B". One batched forward pass per chunk of pairs, no sampling, and no reply
to parse, so this backend never produces a malformed answer; it answers the same question as
the HTTP backend's winner-first reply. Prompts are left-padded so the last position of every
row is the first generated one.
"""

from __future__ import annotations

import io
import math
import threading
import time

import torch
from PIL import Image

from lit_watercolour.rewards.judge import CallRecord


def load_image(png: bytes, max_pixels: int) -> Image.Image:
    """The PNG as RGB, scaled down (aspect kept) to at most `max_pixels`."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    scale = math.sqrt(max_pixels / (img.width * img.height))
    if scale < 1:
        img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.BICUBIC)
    return img


def letter_ids(tokenizer) -> tuple[int, int]:
    ids = [tokenizer.encode(letter, add_special_tokens=False) for letter in ("A", "B")]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"'A' and 'B' must be single tokens, got {ids}")
    return ids[0][0], ids[1][0]


class TransformersJudge:
    """The model loads in `setup(device)` (the trainer's device) and is freed in `teardown()`; a judge built
    `from_model` keeps the model it was given."""

    def __init__(self, model: str = "Qwen/Qwen3-VL-30B-A3B-Instruct", dtype: str = "bfloat16",
                 batch_size: int = 8, max_pixels: int = 448 * 448, revision: str | None = None) -> None:
        self.model_name, self.dtype, self.revision = model, dtype, revision
        self.batch_size, self.max_pixels = batch_size, max_pixels
        self.model = self.processor = None
        self.owned = True  # loaded here, so freed here

    def setup(self, device) -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if self.model is None:
            self.model = AutoModelForImageTextToText.from_pretrained(
                self.model_name, dtype=getattr(torch, self.dtype), revision=self.revision).to(device).eval()
            self.processor = AutoProcessor.from_pretrained(self.model_name, revision=self.revision)
            self._prepare()

    def teardown(self) -> None:
        if self.owned:
            self.model = self.processor = None

    @classmethod
    def from_model(cls, model, processor, batch_size: int = 8, max_pixels: int = 448 * 448) -> "TransformersJudge":
        """Wrap an already built model + processor (tests, benchmarks, a model shared with other code)."""
        self = cls(type(model).__name__, batch_size=batch_size, max_pixels=max_pixels)
        self.model, self.processor, self.owned = model.eval(), processor, False
        self._prepare()
        return self

    def _prepare(self) -> None:
        self.processor.tokenizer.padding_side = "left"
        self.ids = letter_ids(self.processor.tokenizer)
        self.lock = threading.Lock()  # rollouts scored from several threads take the model in turn

    @torch.inference_mode()
    def logits_ab(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> torch.Tensor:
        """[len(pairs), 2] logits of "A" and "B" at the first generated position (fp32, on CPU)."""
        out = []
        device = next(self.model.parameters()).device
        decoded: dict[bytes, Image.Image] = {}  # a candidate meets 2 x references pairs, a reference many candidates
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start:start + self.batch_size]
            messages = [[{"role": "user", "content": [{"type": "text", "text": prompt}, {"type": "image"}, {"type": "image"}]}]] * len(chunk)
            text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            images = [decoded.get(png) or decoded.setdefault(png, load_image(png, self.max_pixels)) for pair in chunk for png in pair]
            batch = self.processor(text=text, images=images, padding=True, return_tensors="pt").to(device)
            logits = self.model(**batch, logits_to_keep=1).logits[:, -1]
            out.append(logits[:, list(self.ids)].float().cpu())
        return torch.cat(out) if out else torch.zeros(0, 2)

    def compare(self, pairs: list[tuple[bytes, bytes]], prompt: str) -> tuple[list[str | None], list[CallRecord]]:
        with self.lock:
            t0 = time.perf_counter()
            ab = self.logits_ab(pairs, prompt)
        per_pair = (time.perf_counter() - t0) / max(len(pairs), 1)  # one batched call; latency shared out
        verdicts = ["A" if a > b else "B" for a, b in ab.tolist()]
        return verdicts, [CallRecord(per_pair, True) for _ in verdicts]
