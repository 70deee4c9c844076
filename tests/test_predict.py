"""`predict` paints with the trained adapter, not the base: an adapter taught one of the tiny painter's four
sketches, given either way a user gives it (`policy.adapter`, a checkpoint's `ckpt_path`), makes every painting
that sketch, while the base mixes its sketches."""

import json

import lightning
import lightning.pytorch as pl
import pytest
import torch

from lit_watercolour.sandbox import RenderConfig
from lit_watercolour.data import PromptDataModule, chat_prompt
from lit_watercolour.module import GRPOModule
from lit_watercolour.policy import PolicyConfig, trainable_state_dict
from lit_watercolour.rewards.gate_term import GateTerm
from lit_watercolour.sampling import SamplingConfig
from cpu_threads import one_thread  # noqa: F401  (fixture)
from tiny_painter import COMPLETIONS, SUBJECT

pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("one_thread")]

TAUGHT = COMPLETIONS[3]  # the one in bare p5 shapes
GENERATIONS = 4


def painting_module(painter, out_dir, adapter: str | None = None) -> GRPOModule:
    return GRPOModule(
        policy=PolicyConfig(model=str(painter), dtype="float32", gradient_checkpointing=False, lora_r=8, lora_alpha=16,
                            adapter=adapter),
        sampling=SamplingConfig(max_completion_length=160, temperature=0.5), predict_generations=GENERATIONS,
        predict_dir=str(out_dir), render=RenderConfig(pixel_density=0.5), rewards=[GateTerm()])


def paint(module: GRPOModule, out_dir, ckpt_path=None) -> list[str]:
    """The raw replies predict wrote (its .txt files), in order."""
    pl.seed_everything(0)
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    (painted,) = trainer.predict(module, datamodule=PromptDataModule(subjects=[SUBJECT]), ckpt_path=ckpt_path)
    assert [r.prompt for r in painted.rollouts] == [SUBJECT] * GENERATIONS
    return [(out_dir / f"a-peach-hibiscus-0-{i}.txt").read_text() for i in range(GENERATIONS)]


def teach(module: GRPOModule, reply: str, steps: int = 60) -> None:
    """Supervised steps on the adapter only, until the policy answers `reply` to the subject."""
    module.configure_model()
    model, tok = module.policy_model, module.tokenizer
    prompt = tok(chat_prompt(tok, SUBJECT), add_special_tokens=False).input_ids
    ids = torch.tensor([prompt + tok(reply + tok.eos_token, add_special_tokens=False).input_ids])
    labels = ids.clone()
    labels[:, : len(prompt)] = -100
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


def test_predict_paints_with_the_trained_adapter_not_the_base(tmp_path, painter):
    base = paint(painting_module(painter, tmp_path / "base"), tmp_path / "base")
    # the painter's own sketches, not all the taught one (the base mixes its four: (1/4)^4 that a draw paints only it)
    assert all(reply in COMPLETIONS for reply in base) and base != [TAUGHT] * GENERATIONS

    trained = painting_module(painter, tmp_path / "unused")
    teach(trained, TAUGHT)
    trained.save_adapter(tmp_path / "adapter")
    ckpt = tmp_path / "trained.ckpt"  # what GRPOModule.on_save_checkpoint keeps: the adapter only
    torch.save({"state_dict": trainable_state_dict(trained), "pytorch-lightning_version": lightning.__version__}, ckpt)

    by_folder = paint(painting_module(painter, tmp_path / "folder", adapter=str(tmp_path / "adapter")), tmp_path / "folder")
    by_ckpt = paint(painting_module(painter, tmp_path / "ckpt"), tmp_path / "ckpt", ckpt_path=ckpt)
    assert by_folder == by_ckpt == [TAUGHT] * GENERATIONS


def test_predict_with_two_turns_writes_both_sketches_the_feedback_and_both_scores(tmp_path, painter):
    """`turns: 2` paints as fit rolls out: first sketch, feedback, revision, both gated, rendered and scored; the
    files hold both turns and paintings.jsonl their record as rollouts.jsonl writes it."""
    module = GRPOModule(policy=PolicyConfig(model=str(painter), dtype="float32", gradient_checkpointing=False),
                        sampling=SamplingConfig(max_completion_length=160, temperature=0.5), turns=2,
                        predict_generations=GENERATIONS, predict_dir=str(tmp_path), rewards=[GateTerm(weight=0.05)])
    pl.seed_everything(0)
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    (painted,) = trainer.predict(module, datamodule=PromptDataModule(subjects=[SUBJECT]))
    records = [json.loads(line) for line in (tmp_path / "paintings.jsonl").read_text().splitlines()]
    assert [r["painting"] for r in records] == [f"a-peach-hibiscus-0-{i}" for i in range(GENERATIONS)]
    for record, revision, first in zip(records, painted.rollouts, painted.turn1.rollouts, strict=True):
        stem = tmp_path / record["painting"]
        assert stem.with_suffix(".txt").read_text() == record["completion"] == revision.completion
        assert (tmp_path / f"{stem.name}_turn1.txt").read_text() == record["turn1"]["completion"] == first.completion
        assert record["feedback"] == revision.feedback and record["feedback"].startswith("Your sketch")
        for turn, r in ((record, revision), (record["turn1"], first)):  # scored: the gate term is 1 where it passed
            assert turn["scores"]["gate"] == float(r.gate.passed)
            assert turn["reward"] == pytest.approx(0.05 * r.gate.passed)
        painted_first = first.render is not None and first.render.png is not None
        assert (tmp_path / f"{stem.name}_turn1.png").exists() == painted_first
    assert any((tmp_path / f"{r['painting']}_turn1.png").exists() for r in records)  # the painter's first sketches paint


def test_a_checkpoint_whose_adapter_does_not_match_the_policy_fails_predict_naming_the_keys(tmp_path, painter):
    """Trained on q_proj and v_proj only, painted with the default (every linear layer): predict refuses, naming
    the adapter parameters the checkpoint has no tensor for, instead of painting with part of the adapter."""
    trained = GRPOModule(policy=PolicyConfig(model=str(painter), dtype="float32", gradient_checkpointing=False,
                                             lora_r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    trained.configure_model()
    ckpt = tmp_path / "narrow.ckpt"
    torch.save({"state_dict": trainable_state_dict(trained), "pytorch-lightning_version": lightning.__version__}, ckpt)
    with pytest.raises(ValueError, match=r"no tensor for \d+ of the policy's adapter parameters \(policy_model\.\S+"
                                         r"\.(k_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_[AB]\.default\.weight"):
        paint(painting_module(painter, tmp_path / "ckpt"), tmp_path / "ckpt", ckpt_path=ckpt)
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())  # nothing painted
