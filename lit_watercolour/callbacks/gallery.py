"""What a person looks at during and after a run: contact sheets and one HTML gallery.

Every `every_n_steps` optimizer steps (and at the first and last step) the step's group of
renders becomes a *snapshot*: a contact sheet (PNG, each tile labelled with its reward or gate
failure), the renders and their code in `step_NNNNN/`, and an entry per painting in
`gallery.json`. Every step the run's metrics (reward, gate pass rate, each term's mean and the
image-statistics scorer's parts) are appended to `curve.json`. From those two files `gallery.html` is
rewritten at each snapshot, so an interrupted run still leaves one behind. It is one file that
opens offline: reward curves drawn as inline SVG, the earliest and latest snapshots side by
side, then every snapshot, each painting (inlined as a JPEG thumbnail) beside its reward terms
and code; `early_vs_late.png` is the first and last contact sheet side by side. Every step's
renders are also kept beside the run's `rollouts.jsonl` (`renders/step_NNNNN/`), for
`scripts/export_rollouts.py`.
`python -m lit_watercolour.callbacks.gallery RUN/gallery` rebuilds both from the two files.
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
from lit_watercolour.rewards.image_stats import PARTS

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


def is_curve(key: str) -> bool:
    """The mixed reward, the gate pass rate, each term's mean (the gate's is its pass rate) and the
    image-statistics scorer's parts."""
    parts = key.split("/")
    return key in ("reward", "gate/pass_rate") or key.startswith("turns/") or (
        len(parts) == 3 and parts[0] == "reward" and parts[1] != "gate" and parts[2] in ("mean", *PARTS))


def curve_row(step: int, metrics: dict) -> dict[str, float]:
    """The plotted metrics of one step, out of everything the step logged."""
    row = {"step": step}
    for key, value in metrics.items():
        if is_curve(key) and math.isfinite(float(value)):
            row[key] = float(value)
    return row


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
        self.curve: list[dict] = []

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
        self.curve.append(curve_row(step, trainer.callback_metrics))
        (out / "curve.json").write_text(json.dumps(self.curve))
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
                "code": r.code or r.completion,
            })
            if step_result.batch.turn1 is not None:  # two turns: the first sketch and what it was told
                self.entries[-1]["turn1"] = first_turn(step_result.batch.turn1, i, step_dir)
                self.entries[-1]["feedback"] = r.feedback
        sheet = contact_sheet([r.render.png if r.render else None for r in rollouts], labels, self.columns)
        sheet.save(out / f"contact_step_{step:05d}.png")
        (out / "gallery.json").write_text(json.dumps(self.entries))
        write_gallery(out, self.entries, self.curve)
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


def fmt(x: float | None) -> str:
    return "missing" if x is None or math.isnan(x) else f"{x:.3f}"


def thumbnail_uri(path: Path) -> str:
    """The render as an inline JPEG data URI, THUMB pixels square: the HTML needs no other file."""
    buf = BytesIO()
    Image.open(path).convert("RGB").resize((THUMB, THUMB), Image.LANCZOS).save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def svg_curve(title: str, points: list[tuple[int, float]], marks: list[int], width: int = 300, height: int = 150) -> str:
    """One small line chart: the values per step, with the snapshot steps as ticks under it."""
    left, right, top, bottom = 42, 8, 20, 24
    steps, values = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(steps + marks), max(steps + marks)
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    sx = lambda s: left + (s - x0) / max(x1 - x0, 1) * (width - left - right)  # noqa: E731
    sy = lambda v: top + (hi - v) / (hi - lo) * (height - top - bottom)  # noqa: E731
    line = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in points)
    dots = "".join(f'<circle cx="{sx(s):.1f}" cy="{sy(v):.1f}" r="2"/>' for s, v in points)
    ticks = "".join(f'<line x1="{sx(s):.1f}" x2="{sx(s):.1f}" y1="{height - bottom}" y2="{height - bottom + 4}"/>' for s in marks)
    return (
        f'<svg class="curve" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
        f'<text x="{left}" y="13" class="title">{html.escape(title)}</text>'
        f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" class="frame"/>'
        f'<text x="{left - 4}" y="{top + 9}" class="ylab">{hi:.3f}</text>'
        f'<text x="{left - 4}" y="{height - bottom}" class="ylab">{lo:.3f}</text>'
        f'<text x="{left}" y="{height - 6}" class="xlab">step {x0}</text>'
        f'<text x="{width - right}" y="{height - 6}" class="xlab" text-anchor="end">{x1}</text>'
        f'<g class="ticks">{ticks}</g><polyline points="{line}" class="line"/><g class="dots">{dots}</g></svg>'
    )


def curve_panels(curve: list[dict], marks: list[int]) -> str:
    logged = {k for row in curve for k in row if is_curve(k)} - {"reward", "gate/pass_rate"}
    means = sorted(k for k in logged if k.endswith("/mean"))
    keys = ["reward", "gate/pass_rate", *means, *sorted(logged - set(means))]
    panels = []
    for key in keys:
        points = [(row["step"], row[key]) for row in curve if key in row]
        if points:
            title = {"reward": "reward (the mix)", "gate/pass_rate": "gate pass rate"}.get(key, key.removesuffix("/mean"))
            panels.append(svg_curve(title, points, marks))
    return "".join(panels)


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
    ".curves{display:flex;flex-wrap:wrap;gap:8px}.curve .title{font-size:12px;font-weight:bold}"
    ".curve .frame{fill:#fafafa;stroke:#ccc}.curve .line{fill:none;stroke:#1f6fb2;stroke-width:1.5}"
    ".curve .dots{fill:#1f6fb2}.curve .ticks{stroke:#c33}.curve .ylab{font-size:10px;text-anchor:end}"
    ".curve .xlab{font-size:10px}.pair{display:flex;gap:24px}.col{flex:1}.tiles{display:flex;flex-wrap:wrap;gap:4px}"
    ".card{display:flex;gap:10px;align-items:flex-start;border-bottom:1px solid #ddd;padding:8px 0}"
    ".terms{width:210px;flex:none}.terms ul{padding-left:18px;margin:4px 0}"
    ".code{flex:1;height:256px;overflow:auto;background:#f6f6f6;margin:0;font-size:11px}"
    ".none{width:256px;height:256px;background:#ccc;flex:none}.none.small{width:160px;height:160px}"
    ".feedback{background:#fff8e6;margin:0;padding:6px;font-size:12px;white-space:pre-wrap}"
)


def write_gallery(folder: Path, entries: list[dict], curve: list[dict]) -> Path:
    """gallery.html in `folder`: curves, first against last snapshot, then every snapshot, newest first."""
    steps = sorted({e["step"] for e in entries})
    by_step = {s: sorted((e for e in entries if e["step"] == s), key=lambda e: e["index"]) for s in steps}
    parts = [f"<h1>lit-watercolour gallery</h1><p>{len(curve)} steps logged, {len(steps)} snapshots "
             f"(steps {', '.join(map(str, steps))}), {len(entries)} paintings.</p>"]
    if curve:
        parts.append(f"<h2>Learning curves</h2><p>Per step; red ticks mark the snapshot steps.</p>"
                     f"<div class=curves>{curve_panels(curve, steps)}</div>")
    if steps:
        parts.append(f"<h2>Earliest against latest snapshot</h2>{side_by_side(by_step[steps[0]], by_step[steps[-1]], folder)}")
        nav = " ".join(f'<a href="#step-{s}">step {s}</a>' for s in steps)
        parts.append(f"<h2>Every snapshot</h2><nav>{nav}</nav>")
        for s in reversed(steps):
            cards = "".join(card(e, folder) for e in by_step[s])
            parts.append(f'<section id="step-{s}"><h2>step {s}: {snapshot_summary(by_step[s])}</h2>{cards}</section>')
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
    curve_file = args.folder / "curve.json"
    curve = json.loads(curve_file.read_text()) if curve_file.exists() else []
    print(write_gallery(args.folder, entries, curve))
    if entries:
        early_late_picture(args.folder, entries).save(args.folder / "early_vs_late.png")
        print(args.folder / "early_vs_late.png")


if __name__ == "__main__":
    main()
