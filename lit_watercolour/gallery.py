"""What a person looks at during and after a run: contact sheets and an HTML gallery.

Every `every_n_steps` optimizer steps the step's group of renders becomes one contact sheet
(PNG, each tile labelled with its reward or gate failure) and its renders, code and reward
terms are added to `gallery.html` in the run folder. The gallery is rewritten at each
snapshot, so an interrupted run still leaves one behind.
"""

from __future__ import annotations

import html
import json
import math
from io import BytesIO
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from PIL import Image, ImageDraw

TILE = 192  # contact sheet thumbnail side, pixels
LABEL_H = 30


def contact_sheet(pngs: list[bytes | None], labels: list[str], columns: int = 4) -> Image.Image:
    """A grid of thumbnails with a label strip under each; a missing render is a grey tile."""
    rows = max(1, math.ceil(len(pngs) / columns))
    sheet = Image.new("RGB", (columns * TILE, rows * (TILE + LABEL_H)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (png, label) in enumerate(zip(pngs, labels)):
        x, y = (i % columns) * TILE, (i // columns) * (TILE + LABEL_H)
        if png is not None:
            tile = Image.open(BytesIO(png)).convert("RGB").resize((TILE, TILE), Image.LANCZOS)
        else:
            tile = Image.new("RGB", (TILE, TILE), (200, 200, 200))
        sheet.paste(tile, (x, y))
        draw.text((x + 4, y + TILE + 4), label[:34], fill="black")
    return sheet


def rollout_label(reward: float, passed: bool, reason: str) -> str:
    return f"R {reward:.3f}" if passed else f"fail: {reason}"


class RenderGallery(pl.Callback):
    def __init__(self, every_n_steps: int = 5, columns: int = 4, dirname: str = "gallery") -> None:
        self.every_n_steps = every_n_steps
        self.columns = columns
        self.dirname = dirname
        self.entries: list[dict] = []

    def run_dir(self, trainer: pl.Trainer) -> Path:
        return Path(trainer.log_dir or trainer.default_root_dir) / self.dirname

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        rollouts = pl_module.last_rollouts
        if not rollouts or (step % self.every_n_steps != 0 and step != 1):
            return
        out = self.run_dir(trainer)
        step_dir = out / f"step_{step:05d}"
        step_dir.mkdir(parents=True, exist_ok=True)
        rewards = pl_module.last_rewards.tolist()
        labels = []
        for i, r in enumerate(rollouts):
            labels.append(rollout_label(rewards[i], r.gate.passed, r.gate.reason))
            png = r.render.png if r.render is not None else None
            if png is not None:
                (step_dir / f"{i:02d}.png").write_bytes(png)
            (step_dir / f"{i:02d}.js").write_text(r.code or r.completion)
            terms = {name: float(s[i]) for name, s in pl_module.last_scores.items()}
            self.entries.append({
                "step": step, "index": i, "subject": r.prompt, "reward": rewards[i], "terms": terms,
                "gate": r.gate.reason, "detail": r.gate.detail, "png": f"step_{step:05d}/{i:02d}.png" if png else None,
                "code": r.code or r.completion,
            })
        sheet = contact_sheet([r.render.png if r.render else None for r in rollouts], labels, self.columns)
        sheet.save(out / f"contact_step_{step:05d}.png")
        write_gallery(out / "gallery.html", self.entries)
        (out / "gallery.json").write_text(json.dumps([{k: v for k, v in e.items() if k != "code"} for e in self.entries]))
        if trainer.logger is not None and hasattr(trainer.logger, "experiment") and hasattr(trainer.logger.experiment, "add_image"):
            image = torch.from_numpy(np.asarray(sheet)).permute(2, 0, 1)
            trainer.logger.experiment.add_image("contact_sheet", image, step)


def fmt(x: float) -> str:
    return "missing" if math.isnan(x) else f"{x:.3f}"


def write_gallery(path: Path, entries: list[dict]) -> None:
    """One row per painting, newest step first: the render beside its code and reward terms."""
    rows = []
    for e in sorted(entries, key=lambda e: (-e["step"], e["index"])):
        img = f'<img src="{html.escape(e["png"])}" width="256">' if e["png"] else "<div class=none>no render</div>"
        terms = "".join(f"<li>{html.escape(k)}: {fmt(v)}</li>" for k, v in e["terms"].items())
        gate = "passed" if e["gate"] == "ok" else f'failed: {html.escape(e["gate"])} {html.escape(e["detail"])}'
        rows.append(
            f'<tr><td>{img}</td><td><b>step {e["step"]} #{e["index"]}</b><br>{html.escape(e["subject"])}<br>'
            f'reward {fmt(e["reward"])}<br>gate {gate}<ul>{terms}</ul></td>'
            f'<td><details><summary>code</summary><pre>{html.escape(e["code"])}</pre></details></td></tr>'
        )
    path.write_text(
        "<!doctype html><meta charset=utf-8><title>lit-watercolour gallery</title>"
        "<style>body{font:14px sans-serif}td{vertical-align:top;padding:6px;border-bottom:1px solid #ddd}"
        "pre{max-width:700px;max-height:400px;overflow:auto;background:#f6f6f6}.none{width:256px;height:256px;background:#ccc}</style>"
        f"<h1>lit-watercolour gallery</h1><table>{''.join(rows)}</table>"
    )
