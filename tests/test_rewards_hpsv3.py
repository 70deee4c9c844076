import io
import re

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

from lit_watercolour.rewards.hpsv3 import (PIXELS, REWARD_TOKEN, HPSv3Term, build_hpsv3,
                                           checkpoint_file, hpsv3_batch, prepare_image, remap_hpsv3_keys, smart_resize)
from lit_watercolour.offline.tiny_models import tiny_qwen2_vl
from lit_watercolour.offline.tiny_scorers import tiny_hpsv3 as build_tiny_hpsv3


def to_original_layout(sd: dict) -> dict:
    """transformers 5 keys -> the flat transformers 4.45 keys HPSv3.safetensors was saved with."""
    return {re.sub(r"^model\.language_model\.", "model.", re.sub(r"^model\.visual\.", "visual.", k)): v.contiguous()
            for k, v in sd.items()}


def png(colour, size=(600, 600)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tiny_hpsv3():
    return build_tiny_hpsv3(seed=1)


def test_pixel_budget_and_prompt(tiny_hpsv3):
    assert PIXELS == 448 * 448 and smart_resize(448, 448) == (448, 448) and smart_resize(300, 300) == (448, 448)
    assert smart_resize(600, 600) == (420, 420)  # HPSv3's own float rounding, kept on purpose
    w, h = prepare_image(png("red", (600, 400))).size
    assert w % 28 == 0 and h % 28 == 0 and w * h <= PIXELS and w > h
    _, processor = tiny_hpsv3
    batch = hpsv3_batch(processor, [prepare_image(png("red", (448, 448)))], ["a loose watercolour flower"])
    text = processor.tokenizer.decode(batch["input_ids"][0])
    assert "Textual prompt - a loose watercolour flower" in text and text.count(REWARD_TOKEN) == 1
    assert batch["image_grid_thw"].tolist() == [[1, 32, 32]]  # 448/14 patches a side: 256 visual tokens


def test_original_checkpoint_round_trips(tiny_hpsv3, tmp_path):
    model, processor = tiny_hpsv3
    original = to_original_layout(model.state_dict_hpsv3())
    assert any(k.startswith("visual.") for k in original) and any(k.startswith("model.layers.") for k in original)
    assert any(k.startswith("rm_head.") for k in original) and "lm_head.weight" in original
    path = tmp_path / "HPSv3.safetensors"
    save_file(original, str(path))
    assert checkpoint_file(str(path)) == str(path)
    assert remap_hpsv3_keys(remap_hpsv3_keys(original)) == remap_hpsv3_keys(original)  # idempotent

    _, fresh_processor = tiny_qwen2_vl(seed=9)
    loaded = build_hpsv3(model.backbone.config, fresh_processor, load_file(str(path)), dtype=torch.float32)
    ref, new = model.state_dict_hpsv3(), loaded.state_dict_hpsv3()
    assert ref.keys() == new.keys()
    for k in ref:
        torch.testing.assert_close(new[k], ref[k], rtol=0, atol=0)
    assert loaded.rm_head[0].weight.dtype == torch.float32

    pngs = [png("white"), png((200, 80, 90)), png((30, 60, 200))]
    a = HPSv3Term.from_model(model, processor, batch_size=2)
    b = HPSv3Term.from_model(loaded, fresh_processor, batch_size=3)
    torch.testing.assert_close(a.mu_sigma(pngs), b.mu_sigma(pngs))


def test_hpsv3_loads_only_through_the_reward_models_callback(tiny_hpsv3, monkeypatch):
    """A config without the judge: HPSv3 loads in no `__init__` and no module hook, only in the RewardModels
    callback the module contributes, on the trainer's device, for fit and validate (not predict); freed in
    teardown."""
    import lightning.pytorch as pl

    from lit_watercolour.callbacks.rewards import RewardModels
    from lit_watercolour.module import GRPOModule
    from lit_watercolour.rewards import hpsv3
    from lit_watercolour.rewards.gate_term import GateTerm

    model, processor = tiny_hpsv3
    loads = []  # no Hub here: the loader builds the tiny HPSv3 where the real one would read the checkpoint

    def load(checkpoint, base_model, device, dtype):
        loads.append((checkpoint, device))
        return model.to(device), processor
    monkeypatch.setattr(hpsv3, "load_hpsv3", load)
    term = HPSv3Term(checkpoint="MizzenAI/HPSv3", dtype="float32")
    module = GRPOModule(rewards=[GateTerm(), term])
    assert term.model is None
    (models,) = [c for c in module.configure_callbacks() if isinstance(c, RewardModels)]
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False)
    models.setup(trainer, module, "predict")
    assert term.model is None
    models.setup(trainer, module, "fit")
    assert loads == [("MizzenAI/HPSv3", str(trainer.strategy.root_device))] and term.model is model
    models.teardown(trainer, module, "fit")
    assert term.model is None
    models.setup(trainer, module, "validate")
    assert len(loads) == 2


def test_scores_are_sigmoid_of_mu_and_batch_invariant(tiny_hpsv3):
    model, processor = tiny_hpsv3
    from lit_watercolour.records import RenderResult, Rollout

    scorer = HPSv3Term.from_model(model, processor, batch_size=2)
    pngs = [png("white"), png((200, 80, 90)), png((30, 60, 200))]
    mu = scorer.mu_sigma(pngs)[:, 0]
    one_by_one = torch.cat([scorer.mu_sigma([p])[:, 0] for p in pngs])
    torch.testing.assert_close(mu, one_by_one, atol=1e-5, rtol=1e-5)
    assert len(set(mu.tolist())) == 3  # the image reaches the score
    scored = scorer.score([Rollout("x", "", 0, 0, render=RenderResult(png=p)) for p in pngs])
    torch.testing.assert_close(scored.values, torch.sigmoid(mu / 4))
    assert scorer.weight == 0.30 and scorer.prompt == "a loose watercolour flower"
    assert scored.metrics["mu_mean"] == pytest.approx(mu.mean().item())


def test_a_600_and_a_256_render_meet_the_pixel_budget(tiny_hpsv3):
    model, processor = tiny_hpsv3
    big, small = png((200, 80, 90), (600, 600)), png((200, 80, 90), (256, 256))
    assert prepare_image(big).size == (420, 420) and prepare_image(small).size == (448, 448)  # HPSv3's own rounding
    batch = hpsv3_batch(processor, [prepare_image(big), prepare_image(small)], ["a loose watercolour flower"] * 2)
    assert batch["image_grid_thw"].tolist() == [[1, 30, 30], [1, 32, 32]]
    scorer = HPSv3Term.from_model(model, processor, batch_size=2)
    together = scorer.mu_sigma([big, small])  # one padded batch of two sizes
    alone = torch.cat([scorer.mu_sigma([big]), scorer.mu_sigma([small])])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)
