"""Export a run's rollouts, with their renders, as a Hub dataset (an image folder), and push it.

Reads `rollouts.jsonl` and the renders `RenderGallery` keeps beside it (`renders/step_NNNNN/RR.png`)
in a run's log root (by default `runs/default`) and writes a dataset in the Hub's image-folder
layout, which the Hub's viewer and `datasets.load_dataset(folder)` read as they are:

    OUT/README.md                       dataset card
    OUT/train/metadata.jsonl            one row per rollout: file_name, step, group, row, subject, seed,
                                        gate, reward, advantage, scores{term: value}, code, completion, has_image
    OUT/train/step_NNNNN/RR.png         the render of each rollout that has one
    OUT/train/no_render.png             the image of rows without a render (a gate failure before rendering)
    two turns (`model.turns: 2`): each row is the revision, with `feedback` (what it was told) and `turn1` (the
    first sketch's code, completion, gate, scores and reward), its render as `turn1_file_name` (RR_turn1.png)

    python scripts/export_rollouts.py runs/default --out runs/default/dataset [--push-to USER/NAME | --push-to ./folder]

`--push-to` a Hub id uploads the folder as a dataset repo (private unless --public), with the token
in `HF_TOKEN` (or a `huggingface-cli login`); a local path receives a copy instead (offline runs, tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from PIL import Image

from lit_watercolour.callbacks.checkpoint import is_local
from lit_watercolour.callbacks.runlog import ROLLOUTS_FILE, RolloutLog

NO_RENDER = "no_render.png"
FIELDS = ("step", "group", "row", "subject", "seed", "gate", "reward", "advantage", "scores", "code", "completion")


def render_path(root: Path, record: dict, suffix: str = "") -> Path:
    return root / "renders" / f"step_{record['step']:05d}" / f"{record['row']:02d}{suffix}.png"


def copy_render(root: Path, split: Path, src: Path) -> str:
    """The render copied into the split; its file name there, or NO_RENDER."""
    if not src.exists():
        return NO_RENDER
    file_name = src.relative_to(root / "renders").as_posix()
    (split / file_name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, split / file_name)
    return file_name


def dataset_card(name: str, rows: list[dict]) -> str:
    steps = sorted({r["step"] for r in rows})
    span = f"steps {steps[0]} to {steps[-1]}" if steps else "no steps"
    return (
        "---\nlicense: apache-2.0\ntask_categories:\n- text-to-image\ntags:\n- grpo\n- watercolour\n- p5.brush\n---\n\n"
        f"# {name}\n\nRollouts of a lit-watercolour GRPO run: {len(rows)} sketches written by the policy, {span}, "
        f"each with its render (`image`), the gate's verdict, every reward term's score, the mixed reward and "
        f"the group-relative advantage. Rows whose sketch failed the gate before rendering show `{NO_RENDER}` "
        "and have `has_image` false. Scores of 0 on a gate failure are the reward mix's rule, not a judgement.\n"
    )


def export(root: Path, out: Path, name: str = "lit-watercolour rollouts") -> list[dict]:
    """Write the image-folder dataset of `root`'s run log to `out` (replaced); returns its metadata rows."""
    log = RolloutLog(root / ROLLOUTS_FILE)
    if not log.path.exists():
        raise FileNotFoundError(f"no {ROLLOUTS_FILE} in {root}: pass the run's log root (e.g. runs/default)")
    records = log.read()
    if out.exists():
        shutil.rmtree(out)
    split = out / "train"
    split.mkdir(parents=True)
    Image.new("RGB", (64, 64), (200, 200, 200)).save(split / NO_RENDER)
    rows = []
    for record in records:
        file_name = copy_render(root, split, render_path(root, record))
        rows.append({"file_name": file_name, "has_image": file_name != NO_RENDER, **{k: record.get(k) for k in FIELDS}})
        if "turn1" in record:  # two turns: the first sketch beside the revision
            rows[-1].update(feedback=record["feedback"], turn1=record["turn1"],
                            turn1_file_name=copy_render(root, split, render_path(root, record, "_turn1")))
    with (split / "metadata.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out / "README.md").write_text(dataset_card(name, rows), encoding="utf-8")
    return rows


def push(folder: Path, repo: str, private: bool = True) -> str:
    """Upload `folder` as the Hub dataset repo `repo` (created if missing), or copy it to a local path."""
    if is_local(repo):
        dest = Path(repo.removeprefix("file://"))
        shutil.copytree(folder, dest, dirs_exist_ok=True)
        return str(dest)
    from huggingface_hub import HfApi, get_token

    token = os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise SystemExit(f"pushing to the Hub dataset {repo!r} needs a token: set HF_TOKEN (a write token)")
    api = HfApi(token=token)
    api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
    return str(api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=str(folder), commit_message="Upload rollouts"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, nargs="?", default=Path("runs/default"), help="the run's log root, holding rollouts.jsonl")
    ap.add_argument("--out", type=Path, help="dataset folder (default: ROOT/dataset)")
    ap.add_argument("--push-to", help="a Hub dataset id (USER/NAME) or a local folder")
    ap.add_argument("--public", action="store_true", help="make a new Hub repo public (default private)")
    args = ap.parse_args()
    out = args.out or args.root / "dataset"
    rows = export(args.root, out)
    print(json.dumps({"rows": len(rows), "with_image": sum(r["has_image"] for r in rows), "folder": str(out)}))
    if args.push_to:
        print(json.dumps({"pushed": push(out, args.push_to, private=not args.public)}))


if __name__ == "__main__":
    main()
