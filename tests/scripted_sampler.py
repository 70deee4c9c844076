"""A sampler backend that replays fixed completions, reporting rows in a chosen order.

It implements the `Sampler` protocol like the hf and vLLM backends: real token ids from the
tokenizer and, given a model, the policy's real log-probs of them. Tests use it to make a
step's completions (and so its gate verdicts) deterministic, and to report rows out of order
as a vLLM server does.
"""

from __future__ import annotations

import torch

from lit_watercolour.policy import completion_logps
from lit_watercolour.sampling import SampleBatch


class ScriptedSampler:
    def __init__(self, tokenizer, texts: list[str], order: list[int] | None = None, model=None) -> None:
        self.tokenizer, self.texts, self.model = tokenizer, texts, model
        self.order = list(range(len(texts))) if order is None else order

    def sync_weights(self, model) -> None:
        self.model = model

    def close(self) -> None:
        pass

    @torch.no_grad()
    def sample(self, prompts: list[str], n: int, on_completion=None, generator=None) -> SampleBatch:  # draws nothing
        if len(prompts) * n != len(self.texts):
            raise ValueError(f"scripted for {len(self.texts)} rows, asked for {len(prompts) * n}")
        tok = self.tokenizer
        rows = [p for p in prompts for _ in range(n)]
        enc = tok(rows, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        done = tok([t + tok.eos_token for t in self.texts], return_tensors="pt", padding=True,
                   padding_side="right", add_special_tokens=False)
        completion_ids, completion_mask = done.input_ids, done.attention_mask
        for row in self.order:
            if on_completion is not None:
                on_completion(row, self.texts[row])
        logps = torch.zeros(completion_ids.shape)
        if self.model is not None:
            was_training = self.model.training
            self.model.eval()
            logps = completion_logps(self.model, enc.input_ids, enc.attention_mask, completion_ids,
                                     completion_mask, 1.0, len(rows))[0] * completion_mask
            self.model.train(was_training)
        return SampleBatch(
            prompt_ids=enc.input_ids, prompt_mask=enc.attention_mask, completion_ids=completion_ids,
            completion_mask=completion_mask, texts=list(self.texts),
            truncated=torch.zeros(len(rows), dtype=torch.bool), logps=logps,
            groups=[i for i in range(len(prompts)) for _ in range(n)],
        )
