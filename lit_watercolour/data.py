"""Prompts: subjects from the config become chat prompts, one stream of groups per optimizer step.

GRPO has no dataset to exhaust, so training reads an endless stream (bounded by
`trainer.max_steps`); validation and predict read each subject once. Each prompt carries the
seed its group shares for rendering and reference draws; the stream restarts at the resumed
step, so a resumed run sees the prompts and seeds it would have seen.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import lightning.pytorch as pl
from torch.utils.data import DataLoader, IterableDataset

from lit_watercolour.bounds import require
from lit_watercolour.prompts import SYSTEM_PROMPT, chat_messages
from lit_watercolour.prompts import system_prompt as read_system_prompt


@dataclass
class Prompt:
    subject: str
    text: str  # the chat-templated prompt, ending with the assistant turn's opening
    seed: int  # shared by the group: render seed and reference draw


def chat_prompt(tokenizer, subject: str, system: str = SYSTEM_PROMPT) -> str:
    """The templated prompt; thinking is switched off where the template has the switch (Qwen3, Qwen3.5)."""
    kwargs = {"enable_thinking": False} if "enable_thinking" in (tokenizer.chat_template or "") else {}
    return tokenizer.apply_chat_template(chat_messages(subject, system), tokenize=False, add_generation_prompt=True, **kwargs)


def group_seed(seed: int, index: int) -> int:
    return random.Random(f"{seed}:{index}").randrange(2**31)


class PromptStream(IterableDataset):
    """Endless batches of `prompts_per_step` prompts, starting at batch `start`."""

    def __init__(self, subjects: list[str], tokenizer, prompts_per_step: int, shuffle: bool, seed: int, start: int = 0,
                 system: str = SYSTEM_PROMPT):
        self.texts = {s: chat_prompt(tokenizer, s, system) for s in subjects}
        self.subjects, self.prompts_per_step, self.shuffle, self.seed, self.start = subjects, prompts_per_step, shuffle, seed, start

    def subject(self, index: int) -> str:
        epoch, pos = divmod(index, len(self.subjects))
        order = list(self.subjects)
        if self.shuffle:
            random.Random(f"{self.seed}:epoch{epoch}").shuffle(order)
        return order[pos]

    def batch(self, step: int) -> list[Prompt]:
        """Batch `step` of the stream: a pure function of (subjects, seed, step)."""
        idx = range(step * self.prompts_per_step, (step + 1) * self.prompts_per_step)
        return [Prompt(self.subject(i), self.texts[self.subject(i)], group_seed(self.seed, i)) for i in idx]

    def __iter__(self) -> Iterator[list[Prompt]]:
        step = self.start
        while True:
            yield self.batch(step)
            step += 1


class PromptDataModule(pl.LightningDataModule):
    def __init__(
        self,
        subjects: list[str] | None = None,
        prompts_per_step: int = 1,  # groups per optimizer step
        shuffle: bool = True,
        seed: int = 0,
        val_subjects: list[str] | None = None,  # default: `subjects`
        predict_subjects: list[str] | None = None,  # default: `subjects`
        tokenizer: str | None = None,  # default: the tokenizer of the trainer's module
        system_prompt: str = "offline",  # a preset of lit_watercolour.prompts ("offline", "recipe") or a text file
    ) -> None:
        """The prompts: chat-templated subjects, one group per prompt, seeded per group.

        Args:
            subjects: What to paint; one subject a prompt, cycled (shuffled per pass).
            prompts_per_step: Prompts (groups) per optimizer step.
            shuffle: Shuffle the subjects' order each pass.
            seed: Seed of the subject order and of each group's render and reference draw.
            val_subjects: Subjects of validation; None: `subjects`.
            predict_subjects: Subjects that `predict` paints; None: `subjects`.
            tokenizer: A tokenizer to template prompts with; None: the policy's.
            system_prompt: offline (this project's 512-px prompt), recipe (the recipe's), or a text file.
        """
        super().__init__()
        require(prompts_per_step >= 1, "data.prompts_per_step", ">= 1", prompts_per_step)
        self.subjects = subjects or ["a peach hibiscus"]
        self.prompts_per_step, self.shuffle, self.seed = prompts_per_step, shuffle, seed
        self.val_subjects, self.predict_subjects = val_subjects or self.subjects, predict_subjects or self.subjects
        self.tokenizer_path = tokenizer
        self.system = read_system_prompt(system_prompt)  # read now: a bad name or path fails before any model loads

    def tokenizer(self):
        if self.tokenizer_path is not None:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(self.tokenizer_path)
        return self.trainer.lightning_module.tokenizer

    def train_dataloader(self) -> DataLoader:
        # global_step is restored before this is called; each batch makes num_iterations steps
        start = self.trainer.global_step // getattr(self.trainer.lightning_module, "num_iterations", 1)
        self.train_stream = PromptStream(self.subjects, self.tokenizer(), self.prompts_per_step, self.shuffle,
                                         self.seed, start, self.system)
        return DataLoader(self.train_stream, batch_size=None)

    def train_prompts(self, step: int) -> list[Prompt]:
        """The prompts the training stream yields as batch `step`, ahead of the loader (a step that
        overlaps samples the next batch's)."""
        return self.train_stream.batch(step)

    def fixed_prompts(self, subjects: list[str]) -> DataLoader:
        tok = self.tokenizer()
        prompts = [Prompt(s, chat_prompt(tok, s, self.system), group_seed(self.seed, -1 - i)) for i, s in enumerate(subjects)]
        return DataLoader(prompts, batch_size=self.prompts_per_step, collate_fn=list)

    def val_dataloader(self) -> DataLoader:
        return self.fixed_prompts(self.val_subjects)

    def predict_dataloader(self) -> DataLoader:
        return self.fixed_prompts(self.predict_subjects)
