"""What a person looks at during and after a run: contact sheets and one HTML gallery.

Every `every_n_steps` optimizer steps (and at the first and last step) the step's group of
renders becomes a *snapshot*: a contact sheet (PNG, each tile labelled with its reward or gate
failure), the renders and their code in `step_NNNNN/`, and an entry per painting in
`gallery.json`. From that file `gallery.html` is rewritten at each snapshot, so an interrupted run
still leaves one behind. It is one file that opens offline, for the people who look at paintings: the
earliest and latest snapshots side by side, then every snapshot, each painting (inlined as a JPEG
thumbnail) beside its reward terms and code; `early_vs_late.png` is the first and last contact sheet
side by side. Each snapshot has a line of the step's reward-hacking monitors (`monitor_line`). Curves are the
logger's (metrics.csv, TensorBoard), in the version folder above the gallery. Every step's
renders are also kept beside the run's `rollouts.jsonl` (`renders/step_NNNNN/`), for
`scripts/export_rollouts.py`.
`python -m lit_watercolour.callbacks.gallery RUN/gallery` rebuilds both from gallery.json.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import math
from io import BytesIO
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from PIL import Image, ImageDraw

from lit_watercolour.callbacks.runlog import log_root
from lit_watercolour.records import StepResult

TILE = 192  # contact sheet thumbnail side, pixels
LABEL_H = 30
THUMB = 256  # gallery thumbnail side, pixels


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
    def __init__(self, every_n_steps: int = 5, columns: int = 4, dirname: str = "gallery", keep_renders: bool = True) -> None:
        """
        Args:
            every_n_steps: Snapshot the group's paintings every this many steps (and the first and last step).
            columns: Paintings per row of a contact sheet.
            dirname: The gallery's folder inside the run's version folder.
            keep_renders: Keep every step's renders beside rollouts.jsonl (scripts/export_rollouts.py reads them).
        """
        self.every_n_steps = every_n_steps
        self.keep_renders = keep_renders  # every step's renders beside rollouts.jsonl (scripts/export_rollouts.py)
        self.columns = columns
        self.dirname = dirname
        self.entries: list[dict] = []

    def run_dir(self, trainer: pl.Trainer) -> Path:
        return Path(trainer.log_dir or trainer.default_root_dir) / self.dirname

    @staticmethod
    def keep(folder: Path, rollouts: list, suffix: str = "") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(rollouts):
            if r.render is not None and r.render.png is not None:
                (folder / f"{i:02d}{suffix}.png").write_bytes(r.render.png)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.is_global_zero:
            return
        step_result: StepResult = outputs["step"]
        step = trainer.global_step
        out = self.run_dir(trainer)
        out.mkdir(parents=True, exist_ok=True)
        rollouts = step_result.batch.rollouts
        root = log_root(trainer)
        if self.keep_renders and root is not None:  # beside the run log
            self.keep(root / "renders" / f"step_{step:05d}", rollouts)
            if step_result.batch.turn1 is not None:  # two turns: the first sketches too
                self.keep(root / "renders" / f"step_{step:05d}", step_result.batch.turn1.rollouts, "_turn1")
        if not rollouts or not (step % self.every_n_steps == 0 or step == 1 or step == trainer.max_steps):
            return
        step_dir = out / f"step_{step:05d}"
        step_dir.mkdir(parents=True, exist_ok=True)
        rewards = step_result.rewards.tolist()
        monitors = monitor_line(step_result.metrics)
        labels = []
        for i, r in enumerate(rollouts):
            labels.append(rollout_label(rewards[i], r.gate.passed, r.gate.reason))
            png = r.render.png if r.render is not None else None
            if png is not None:
                (step_dir / f"{i:02d}.png").write_bytes(png)
            (step_dir / f"{i:02d}.js").write_text(r.code or r.completion)
            terms = {name: float(s[i]) for name, s in step_result.scores.items()}
            self.entries.append({
                "step": step, "index": i, "subject": r.prompt, "reward": rewards[i], "terms": terms,
                "gate": r.gate.reason, "detail": r.gate.detail, "png": f"step_{step:05d}/{i:02d}.png" if png else None,
                "code": r.code or r.completion, "monitors": monitors,
            })
            if step_result.batch.turn1 is not None:  # two turns: the first sketch and what it was told
                self.entries[-1]["turn1"] = first_turn(step_result.batch.turn1, i, step_dir)
                self.entries[-1]["feedback"] = r.feedback
        sheet = contact_sheet([r.render.png if r.render else None for r in rollouts], labels, self.columns)
        sheet.save(out / f"contact_step_{step:05d}.png")
        (out / "gallery.json").write_text(json.dumps(self.entries))
        write_gallery(out, self.entries)
        early_late_picture(out, self.entries).save(out / "early_vs_late.png")
        if trainer.logger is not None and hasattr(trainer.logger, "experiment") and hasattr(trainer.logger.experiment, "add_image"):
            image = torch.from_numpy(np.asarray(sheet)).permute(2, 0, 1)
            trainer.logger.experiment.add_image("contact_sheet", image, step)


def first_turn(turn1, i: int, step_dir: Path) -> dict:
    """Row i's first sketch as a gallery entry's `turn1`: its render beside the revision's, reward, gate, code."""
    r = turn1.rollouts[i]
    png = r.render.png if r.render is not None else None
    if png is not None:
        (step_dir / f"{i:02d}_turn1.png").write_bytes(png)
    return {"reward": float(turn1.rewards[i]), "gate": r.gate.reason, "detail": r.gate.detail,
            "png": f"{step_dir.name}/{i:02d}_turn1.png" if png else None, "code": r.code or r.completion}


def monitor_line(metrics: dict[str, float]) -> str:
    """The step's reward-hacking monitors in one line: the gate's reasons (`gate/reason_<name>`, largest share
    first), the text detector's hits (`gate/text_hits`) and the judge's disagreement between the two orders of
    its pairs (`reward/<judge>/order_disagreement`); what the step did not log is left out."""
    reasons = sorted(((k.removeprefix("gate/reason_"), v) for k, v in metrics.items() if k.startswith("gate/reason_") and v > 0),
                     key=lambda kv: -kv[1])
    parts = ["gate reasons " + (", ".join(f"{name} {v:.0%}" for name, v in reasons) or "none")]
    if "gate/text_hits" in metrics:
        parts.append(f"text hits {metrics['gate/text_hits']:.0f}")
    parts += [f"judge order disagreement {fmt(v)}" for k, v in metrics.items() if k.startswith("reward/") and k.endswith("/order_disagreement")]
    return "; ".join(parts)


def fmt(x: float | None) -> str:
    return "missing" if x is None or math.isnan(x) else f"{x:.3f}"


def thumbnail_uri(path: Path) -> str:
    """The render as an inline JPEG data URI, THUMB pixels square: the HTML needs no other file."""
    buf = BytesIO()
    Image.open(path).convert("RGB").resize((THUMB, THUMB), Image.LANCZOS).save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def card(e: dict, folder: Path) -> str:
    """One painting beside its reward terms and its code; two turns: the first sketch and its feedback before it."""
    first = ""
    if e.get("turn1"):
        t = {**e["turn1"], "step": e["step"], "index": f'{e["index"]} turn 1', "terms": {}}
        first = card(t, folder) + f'<pre class=feedback>{html.escape(e["feedback"] or "")}</pre>'
    if e["png"]:
        img = f'<a href="{html.escape(e["png"])}"><img src="{thumbnail_uri(folder / e["png"])}" width="{THUMB}" height="{THUMB}" alt="step {e["step"]} #{e["index"]}"></a>'
    else:
        img = "<div class=none>no render</div>"
    terms = "".join(f"<li>{html.escape(k)}: {fmt(v)}</li>" for k, v in e["terms"].items())
    gate = "passed" if e["gate"] == "ok" else f'failed: {html.escape(e["gate"])} {html.escape(e["detail"])}'
    return first + (
        f'<div class=card>{img}<div class=terms><b>#{e["index"]}</b> reward <b>{fmt(e["reward"])}</b><br>'
        f'gate {gate}<ul>{terms}</ul></div><pre class=code>{html.escape(e["code"])}</pre></div>'
    )


def snapshot_summary(group: list[dict]) -> str:
    rewards = [e["reward"] for e in group if e["reward"] is not None and not math.isnan(e["reward"])]
    passed = sum(e["gate"] == "ok" for e in group)
    mean = sum(rewards) / len(rewards) if rewards else float("nan")
    return f"mean reward {fmt(mean)}, {passed}/{len(group)} pass the gate"


def side_by_side(first: list[dict], last: list[dict], folder: Path) -> str:
    cols = []
    for group in (first, last):
        tiles = "".join(
            f'<img src="{thumbnail_uri(folder / e["png"])}" width="160" height="160" title="#{e["index"]} reward {fmt(e["reward"])}">'
            if e["png"] else '<div class="none small"></div>' for e in group
        )
        cols.append(f'<div class=col><h3><a href="#step-{group[0]["step"]}">step {group[0]["step"]}</a>: '
                    f'{snapshot_summary(group)}</h3><div class=tiles>{tiles}</div></div>')
    return f'<div class=pair>{"".join(cols)}</div>'


STYLE = (
    "body{font:14px sans-serif;margin:16px;color:#222}h2{margin-top:28px}nav a{margin-right:10px}"
    ".pair{display:flex;gap:24px}.col{flex:1}.tiles{display:flex;flex-wrap:wrap;gap:4px}"
    ".card{display:flex;gap:10px;align-items:flex-start;border-bottom:1px solid #ddd;padding:8px 0}"
    ".terms{width:210px;flex:none}.terms ul{padding-left:18px;margin:4px 0}"
    ".code{flex:1;height:256px;overflow:auto;background:#f6f6f6;margin:0;font-size:11px}"
    ".none{width:256px;height:256px;background:#ccc;flex:none}.none.small{width:160px;height:160px}"
    ".monitors{color:#555;margin:0 0 8px}"
    ".feedback{background:#fff8e6;margin:0;padding:6px;font-size:12px;white-space:pre-wrap}"
)


def write_gallery(folder: Path, entries: list[dict]) -> Path:
    """gallery.html in `folder`: first against last snapshot, then every snapshot, newest first."""
    steps = sorted({e["step"] for e in entries})
    by_step = {s: sorted((e for e in entries if e["step"] == s), key=lambda e: e["index"]) for s in steps}
    parts = [f"<h1>lit-watercolour gallery</h1><p>{len(steps)} snapshots (steps {', '.join(map(str, steps))}), "
             f"{len(entries)} paintings. Learning curves: the logger's, in the run's folder above this one "
             f"(<a href=\"../metrics.csv\">metrics.csv</a>, or <code>tensorboard --logdir</code> that folder).</p>"]
    if steps:
        parts.append(f"<h2>Earliest against latest snapshot</h2>{side_by_side(by_step[steps[0]], by_step[steps[-1]], folder)}")
        nav = " ".join(f'<a href="#step-{s}">step {s}</a>' for s in steps)
        parts.append(f"<h2>Every snapshot</h2><nav>{nav}</nav>")
        for s in reversed(steps):
            cards = "".join(card(e, folder) for e in by_step[s])
            monitors = by_step[s][0].get("monitors")  # galleries written before the monitors have none
            line = f'<p class=monitors>reward-hacking monitors: {html.escape(monitors)}</p>' if monitors else ""
            parts.append(f'<section id="step-{s}"><h2>step {s}: {snapshot_summary(by_step[s])}</h2>{line}{cards}</section>')
    path = folder / "gallery.html"
    path.write_text(f"<!doctype html><html lang=en><meta charset=utf-8><title>lit-watercolour gallery</title>"
                    f"<style>{STYLE}</style><body>{''.join(parts)}</body></html>", encoding="utf-8")
    return path


def early_late_picture(folder: Path, entries: list[dict]) -> Image.Image:
    """The first and last snapshot's contact sheets side by side, each titled with its mean reward."""
    steps = sorted({e["step"] for e in entries})
    sheets = []
    for s in (steps[0], steps[-1]):
        group = [e for e in entries if e["step"] == s]
        sheet = Image.open(folder / f"contact_step_{s:05d}.png").convert("RGB")
        titled = Image.new("RGB", (sheet.width, sheet.height + 24), "white")
        titled.paste(sheet, (0, 24))
        ImageDraw.Draw(titled).text((6, 6), f"step {s}: {snapshot_summary(group)}", fill="black")
        sheets.append(titled)
    gap = 16
    both = Image.new("RGB", (sheets[0].width + sheets[1].width + gap, max(s.height for s in sheets)), "white")
    both.paste(sheets[0], (0, 0))
    both.paste(sheets[1], (sheets[0].width + gap, 0))
    return both


def main() -> None:
    ap = argparse.ArgumentParser(description="Rebuild gallery.html (and early_vs_late.png) from a run's gallery folder.")
    ap.add_argument("folder", type=Path, help="e.g. runs/default/version_0/gallery")
    args = ap.parse_args()
    entries = json.loads((args.folder / "gallery.json").read_text())
    print(write_gallery(args.folder, entries))
    if entries:
        early_late_picture(args.folder, entries).save(args.folder / "early_vs_late.png")
        print(args.folder / "early_vs_late.png")


if __name__ == "__main__":
    main()
