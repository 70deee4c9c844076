"""`sft`'s data: (subject, completion) examples, split into training and held-out rows, prompted as `fit` prompts.

Sources (`SketchDataModule.source`):
  - "corpus": the procedural corpus of p5.brush sketches (`lit_watercolour.offline.corpus`), `num_samples` of them;
  - a local folder, or a Hub dataset id (snapshot-downloaded, sketches and JSON lines only), read by
    `folder_examples`: every `.js` sketch (the reference pool's `sources/<tier>_<name>.js`, the recipe's Hub layout,
    or any folder of sketches), each fenced as a completion and painted as `subject`; and every row of a `.jsonl`
    file that carries a `completion` (or a `code`) with its `subject` (or `prompt`), as exported rollouts have.
The prompt of each row is `lit_watercolour.data.chat_prompt` on the policy's tokenizer with the same system prompt
and tokenized as the samplers tokenize it, so SFT trains on exactly the prompts GRPO later samples from; the
completion ends with the tokenizer's end-of-turn token. The loss covers the completion's tokens only
(`lit_watercolour.sft.sft_loss`).
"""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from lit_watercolour.data import chat_prompt
from lit_watercolour.prompts import system_prompt as read_system_prompt
from lit_watercolour.rewards.pool import _tier_of, json_lines, pool_folder


@dataclass(frozen=True)
class Example:
    subject: str
    completion: str  # what the policy should write: a fenced sketch, perhaps after a sentence


def fenced(code: str) -> str:
    return f"```js\n{code.rstrip()}\n```"


def corpus_examples(num_samples: int, seed: int, exclude: set[str]) -> list[Example]:
    """`num_samples` corpus sketches whose subject is not in `exclude`, deterministic given `seed`. The corpus is an
    offline stand-in, imported only for this source (the runtime imports nothing of `offline`: tests/test_imports.py)."""
    make_sample = importlib.import_module("lit_watercolour.offline.corpus").make_sample
    examples, index = [], 0
    while len(examples) < num_samples:
        if index > 100 * num_samples + 1000:
            raise ValueError(f"exclude_subjects {sorted(exclude)} leaves the corpus (almost) nothing to draw")
        sample = make_sample(seed * 1_000_003 + index)
        index += 1
        if sample.subject not in exclude:
            examples.append(Example(sample.subject, sample.completion))
    return examples


def folder_examples(root: Path, subject: str, tiers: list[str] | None) -> list[Example]:
    """The `.js` sketches under `root` (of `tiers`, by `rewards.pool`'s tier rules; None: all) and the `.jsonl` rows
    that carry a completion."""
    examples = []
    for path in sorted(root.rglob("*.js")):
        if tiers is None or _tier_of(path.relative_to(root)) in tiers:
            examples.append(Example(subject, fenced(path.read_text())))
    for path in sorted(root.rglob("*.jsonl")):
        for row in json_lines(path):
            text = row.get("completion") or (fenced(row["code"]) if row.get("code") else None)
            if text and (tiers is None or row.get("tier") in tiers):
                examples.append(Example(row.get("subject") or row.get("prompt") or subject, text))
    return examples


@dataclass
class Encoded:
    prompt_ids: list[int]
    completion_ids: list[int]


def encode(tokenizer, example: Example, system: str) -> Encoded:
    """The prompt's ids exactly as a sampler makes them (`chat_prompt`, no added special tokens), then the
    completion's, closed by the end-of-turn token the policy stops on."""
    prompt = chat_prompt(tokenizer, example.subject, system)
    return Encoded(tokenizer(prompt, add_special_tokens=False).input_ids,
                   tokenizer(example.completion, add_special_tokens=False).input_ids + [tokenizer.eos_token_id])


def collate(rows: list[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """The samplers' batch layout: prompts padded on the left, completions on the right, with their masks."""
    width_p, width_c = max(len(r.prompt_ids) for r in rows), max(len(r.completion_ids) for r in rows)
    out = {"prompt_ids": torch.full((len(rows), width_p), pad_id), "prompt_mask": torch.zeros(len(rows), width_p, dtype=torch.long),
           "completion_ids": torch.full((len(rows), width_c), pad_id),
           "completion_mask": torch.zeros(len(rows), width_c, dtype=torch.long)}
    for i, r in enumerate(rows):
        p, c = len(r.prompt_ids), len(r.completion_ids)
        out["prompt_ids"][i, width_p - p:] = torch.tensor(r.prompt_ids)
        out["prompt_mask"][i, width_p - p:] = 1
        out["completion_ids"][i, :c] = torch.tensor(r.completion_ids)
        out["completion_mask"][i, :c] = 1
    return out


class SketchDataModule(pl.LightningDataModule):
    def __init__(
        self,
        source: str = "corpus",
        num_samples: int = 512,
        exclude_subjects: list[str] | None = None,
        subject: str = "a peach hibiscus",
        tiers: list[str] | None = None,
        val_fraction: float = 0.1,
        batch_size: int = 4,
        max_length: int = 2048,
        system_prompt: str = "offline",
        seed: int = 0,
        revision: str | None = None,
    ) -> None:
        """Sketches to fine-tune on, as (prompt, completion) rows; a held-out share for the validation loss.

        Args:
            source: "corpus" (the procedural corpus), a folder of `.js` sketches and/or `.jsonl` rows with a
                `completion` or `code` (the reference pool's `sources/` in the recipe's Hub layout), or a Hub dataset
                id of that layout.
            num_samples: Corpus sketches to draw (source "corpus").
            exclude_subjects: Corpus subjects left out of the data (to measure on subjects never trained on).
            subject: The subject a sketch without one is prompted with (`.js` files).
            tiers: Keep only sketches of these tiers (`love`, `okay`, ...: a tier folder or file-name prefix, a
                row's `tier`); None: all.
            val_fraction: Share of the rows held out for the validation loss (at least one row).
            batch_size: Rows per optimizer micro-batch (Lightning's `accumulate_grad_batches` accumulates them).
            max_length: Rows longer than this in tokens (prompt + completion) are left out, never cut: a cut sketch
                would teach truncation.
            system_prompt: offline, recipe, or a text file: what `fit`'s `data.system_prompt` will be.
            seed: Seed of the corpus draw and of the split.
            revision: The Hub dataset's revision.
        """
        super().__init__()
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction is in (0, 1), not {val_fraction}")
        self.source, self.num_samples, self.exclude = source, num_samples, set(exclude_subjects or [])
        self.subject, self.tiers, self.val_fraction, self.batch_size = subject, tiers, val_fraction, batch_size
        self.max_length, self.seed, self.revision = max_length, seed, revision
        self.system = read_system_prompt(system_prompt)  # read now: a bad name or path fails before any model loads
        self.train_rows: list[Encoded] = []
        self.val_rows: list[Encoded] = []

    def examples(self) -> list[Example]:
        if self.source == "corpus":
            return corpus_examples(self.num_samples, self.seed, self.exclude)
        root = pool_folder(self.source, self.revision, sources=True)
        found = folder_examples(root, self.subject, self.tiers)
        if not found:
            raise ValueError(f"{self.source} holds no sketches (.js) and no .jsonl rows with a completion"
                             + (f" of tiers {self.tiers}" if self.tiers else ""))
        return found

    def split(self, tokenizer) -> None:
        """Encode the rows with the policy's tokenizer and split them, once: on first use, when the module's
        configure_model has loaded the tokenizer (Lightning runs the data module's setup before it)."""
        if self.train_rows:
            return
        examples = self.examples()
        random.Random(self.seed).shuffle(examples)
        rows = [encode(tokenizer, e, self.system) for e in examples]
        kept = [r for r in rows if len(r.prompt_ids) + len(r.completion_ids) <= self.max_length]
        if len(kept) < 2:
            raise ValueError(f"{len(kept)} of {len(rows)} rows fit max_length={self.max_length} tokens: "
                             "SFT needs at least one training and one held-out row")
        if len(kept) < len(rows):
            pl.utilities.rank_zero_warn(f"{len(rows) - len(kept)} of {len(rows)} rows are longer than "
                                        f"max_length={self.max_length} tokens and are left out")
        held_out = max(1, round(len(kept) * self.val_fraction))
        self.val_rows, self.train_rows = kept[:held_out], kept[held_out:]
        self.pad_id = tokenizer.pad_token_id

    def train_dataloader(self) -> DataLoader:
        self.split(self.trainer.lightning_module.tokenizer)
        return DataLoader(self.train_rows, batch_size=self.batch_size, shuffle=True, drop_last=False,
                          collate_fn=partial(collate, pad_id=self.pad_id))

    def val_dataloader(self) -> DataLoader:
        self.split(self.trainer.lightning_module.tokenizer)
        return DataLoader(self.val_rows, batch_size=self.batch_size, collate_fn=partial(collate, pad_id=self.pad_id))
