"""`python -m lit_watercolour sft`: the loss is the sketch's tokens only, the held-out loss falls, and `fit` starts
from the adapter it writes with the very log-probs it ended with."""

from __future__ import annotations

import csv
import json

import pytest
import torch
import yaml

from lit_watercolour.__main__ import main
from lit_watercolour.data import chat_prompt
from lit_watercolour.module import GRPOModule
from lit_watercolour.offline.tiny_models import build_tiny_model, tiny_tokenizer
from lit_watercolour.policy import PolicyConfig, completion_logps
from lit_watercolour.prompts import SYSTEM_PROMPT
from lit_watercolour.sft import SFTModule, sft_loss
from lit_watercolour.sft_data import Example, SketchDataModule, collate, encode, fenced

pytestmark = pytest.mark.timeout(1800)  # a hang guard: a loaded 2-core box is slow, never a speed bound

TINY = {"tiny": "qwen3", "tiny_config": {"hidden_size": 64, "num_layers": 2}, "dtype": "float32",
        "gradient_checkpointing": False}
SHORT = ['  brush.fill("#e8735a", 200);\n  brush.circle(256, 256, 120);', '  brush.noStroke();\n  brush.circle(200, 300, 60);']


def test_the_loss_is_the_sketch_tokens_only():
    """sft_loss on a batch padded both ways equals the mean NLL of the completion tokens (end of turn included)
    computed from the model's full logits row by row: no prompt token and no padding is a target."""
    tokenizer = tiny_tokenizer()
    model = build_tiny_model("qwen3", tokenizer, hidden_size=64, num_layers=2).eval()
    rows = [encode(tokenizer, Example("a peach hibiscus", fenced(SHORT[0])), SYSTEM_PROMPT),
            encode(tokenizer, Example("a blue iris in a jug", "A blue iris.\n\n" + fenced(SHORT[1])), SYSTEM_PROMPT)]
    assert len(rows[0].prompt_ids) != len(rows[1].prompt_ids) and len(rows[0].completion_ids) != len(rows[1].completion_ids)
    assert all(r.completion_ids[-1] == tokenizer.eos_token_id for r in rows)
    assert tokenizer.decode(rows[0].prompt_ids) == chat_prompt(tokenizer, "a peach hibiscus")  # fit's prompt, whole
    batch = collate(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        loss, tokens = sft_loss(model, batch)
        nll = []
        for r in rows:
            ids = torch.tensor([r.prompt_ids + r.completion_ids])
            logps = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
            targets = ids[0, 1:]
            nll += [-logps[t, targets[t]] for t in range(len(r.prompt_ids) - 1, ids.shape[1] - 1)]
    assert int(tokens) == sum(len(r.completion_ids) for r in rows) == len(nll)
    torch.testing.assert_close(loss, torch.stack(nll).mean(), rtol=1e-5, atol=1e-5)


def tiny_sft_config(tmp_path) -> str:
    config = {
        "seed_everything": 0,
        "model": {"policy": {**TINY, "lora_r": 8, "lora_alpha": 16},
                  "optim": {"lr": 1e-2, "lr_scheduler": "constant_with_warmup", "warmup_steps": 1},
                  "rewards": [{"class_path": "lit_watercolour.rewards.gate_term.GateTerm", "init_args": {"weight": 0.5}},
                              {"class_path": "lit_watercolour.rewards.length.LengthTerm", "init_args": {"weight": 0.5}}],
                  "sampling": {"max_completion_length": 24}, "samples_per_subject": 2, "threads": {"update": 1}},
        "data": {"source": str(tmp_path / "sketches"), "val_fraction": 0.25, "batch_size": 2},
        "trainer": {"accelerator": "cpu", "devices": 1, "max_steps": 12, "val_check_interval": 3,
                    "num_sanity_val_steps": 0, "log_every_n_steps": 1, "enable_progress_bar": False,
                    "enable_checkpointing": False, "default_root_dir": str(tmp_path / "runs"),
                    "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                               "init_args": {"save_dir": str(tmp_path / "runs"), "name": "sft"}}},
    }
    path = tmp_path / "sft.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_sft_lowers_the_held_out_loss_and_fit_starts_from_its_adapter(tmp_path):
    """A folder of eight short sketches (`.js` files and exported `.jsonl` rows): SFT of a random-init policy's
    adapter lowers the held-out loss from the untrained policy's; the adapter it writes, loaded as `fit` loads
    `--model.policy.adapter`, gives the trained policy's log-probs exactly; samples carry gate verdicts and scores."""
    folder = tmp_path / "sketches"
    (folder / "sources").mkdir(parents=True)
    for i in range(6):
        (folder / "sources" / f"love_{i}.js").write_text(f"// sketch {i}\n{SHORT[i % 2]}\n")
    (folder / "rows.jsonl").write_text("\n".join(json.dumps({"subject": "a red poppy", "code": f"// row {i}\n{SHORT[0]}"})
                                                 for i in range(2)))
    cli = main(["sft", "--config", tiny_sft_config(tmp_path)])
    run = cli.model.run_dir()

    data = SketchDataModule(source=str(folder), val_fraction=0.25, batch_size=2)
    data.split(cli.model.tokenizer)
    assert len(data.train_rows) == 6 and len(data.val_rows) == 2
    val = collate(data.val_rows, cli.model.tokenizer.pad_token_id)
    untrained = SFTModule(policy=PolicyConfig(**TINY, lora_r=8, lora_alpha=16))
    untrained.configure_model()
    with torch.no_grad():
        before = sft_loss(untrained.policy_model, val)[0].item()
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    held_out = [float(r["val/loss"]) for r in rows if r.get("val/loss")]
    assert len(held_out) == 4
    assert all(b < a for a, b in zip([before, *held_out], held_out)), (before, held_out)  # every validation lower
    assert held_out[-1] < before - 0.5, (before, held_out)  # by half a nat in 12 steps

    fit = GRPOModule(policy=PolicyConfig(**TINY, adapter=str(run / "adapter")))
    fit.configure_model()
    args = (val["prompt_ids"], val["prompt_mask"], val["completion_ids"], val["completion_mask"], 1.0, 2)
    with torch.no_grad():
        trained, _ = completion_logps(cli.model.policy_model.eval(), *args)
        resumed, _ = completion_logps(fit.policy_model.eval(), *args)
    assert torch.equal(trained, resumed)
    fit.teardown("fit")

    samples = [json.loads(line) for line in (run / "samples" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all(s["gate"] and set(s["scores"]) == {"gate", "length"} for s in samples)
    summary = json.loads((run / "samples" / "summary.json").read_text())
    assert summary["all"]["n"] == 2 and 0.0 <= summary["all"]["gate_pass_rate"] <= 1.0


def test_a_non_finite_gradient_skips_the_step():
    """A NaN gradient (a bf16 overflow, a bad row) drops every gradient, so AdamW leaves the adapter as it was."""
    module = SFTModule(policy=PolicyConfig(**TINY))
    module.configure_model()
    params = [p for p in module.policy_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    before = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.ones_like(p)
    params[0].grad[0] = float("nan")
    module.configure_gradient_clipping(optimizer)
    optimizer.step()
    assert all(torch.equal(a, p) for a, p in zip(before, params))
    for p in params:
        p.grad = torch.full_like(p, 10.0)
    module.configure_gradient_clipping(optimizer)  # finite: clipped to max_grad_norm, then a step
    assert torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])) <= 1.0 + 1e-4
    optimizer.step()
    assert not torch.equal(before[0], params[0])
