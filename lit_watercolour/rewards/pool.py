"""The reference pool: watercolour renders with quality tiers, drawn deterministically per seed.

A pool is a folder of PNG/JPEG/WebP images with tiers given by, in order of precedence:
  1. `metadata.jsonl`, one JSON object per line naming its image (`file_name`, `file` or `image`,
     relative to the pool root or to its `images/` folder) and its `tier` (a row without a tier
     falls back to 2 and 3 for its file); a metadata file that names no image is ignored;
  2. a folder named after a known tier (`love/`, `okay/`, `meh/`);
  3. a known tier as the filename prefix (`love_003.png`, `okay-12.png`);
  4. any other folder name (`mine/x.png` is in tier "mine");
otherwise the image is in tier "all". The recipe's Hub dataset (`HuggingEnvs/watercolour-reference-pool`,
tiers love/okay) has the tier in the file name, `images/love_<name>.png` (600-px renders),
`sources/love_<name>.js` (the sketch of each) and `metadata.jsonl`; it is snapshot-downloaded and
read by the same folder loader. `pool_folder` resolves a folder or a Hub id to a local folder, with
the sources when asked (`scripts/build_pool.py --rerender`).
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
KNOWN_TIERS = ("love", "okay", "meh")  # best first
DEFAULT_MIX = {"love": 0.5, "okay": 0.5}  # the recipe: 2 top + 2 middle of 4 references
SHIPPED_POOL = Path(__file__).resolve().parents[2] / "renderer" / "pool"


@dataclass(frozen=True)
class Reference:
    name: str  # path relative to the pool root
    tier: str
    png: bytes  # always PNG, so every judge backend receives the same format


def _as_png(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix.lower() == ".png":
        return data
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def _tier_of(rel: Path) -> str:
    """The tier a path implies: a known tier as its top folder or its filename prefix, else its top folder, else "all"."""
    top = rel.parts[0] if len(rel.parts) > 1 else None
    if top in KNOWN_TIERS:
        return top
    head = rel.stem.replace("-", "_").split("_", 1)[0].lower()
    if head in KNOWN_TIERS:
        return head
    return top or "all"


IMAGE_KEYS = ("file_name", "file", "image")  # what a metadata row calls its image


def json_lines(path: Path) -> Iterator:
    """Each non-blank line of a JSON-lines file, parsed; a line that is not JSON fails naming the file and line."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}:{number} is not JSON: {e}") from None


def metadata_rows(root: Path) -> list[dict] | None:
    """The rows of root/metadata.jsonl that name an image, or None when there are none."""
    meta = root / "metadata.jsonl"
    if not meta.exists():
        return None
    rows = []
    for row in json_lines(meta):
        key = next((k for k in IMAGE_KEYS if isinstance(row, dict) and isinstance(row.get(k), str)), None)
        if key is not None:
            rows.append({**row, "file_name": row[key]})
    return rows or None


def _image_path(root: Path, name: str) -> Path:
    for candidate in (root / name, root / "images" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{root / 'metadata.jsonl'} names {name!r}, which is neither in {root} nor in {root / 'images'}")


def pool_folder(source: str | Path, revision: str | None = None, cache_dir: str | None = None,
                sources: bool = False) -> Path:
    """`source` itself if it is a local folder, else the snapshot of that Hub dataset (images and
    metadata; with `sources`, the sketches too)."""
    if Path(source).exists():
        return Path(source)
    from huggingface_hub import snapshot_download

    patterns = [f"*{s}" for s in IMAGE_SUFFIXES] + ["*.jsonl"] + (["*.js"] if sources else [])
    return Path(snapshot_download(str(source), repo_type="dataset", revision=revision, cache_dir=cache_dir,
                                  allow_patterns=patterns))


class ReferencePool:
    def __init__(self, references: list[Reference]) -> None:
        if not references:
            raise ValueError("a reference pool needs at least one image")
        self.references = sorted(references, key=lambda r: r.name)
        self.by_tier: dict[str, list[Reference]] = {}
        for ref in self.references:
            self.by_tier.setdefault(ref.tier, []).append(ref)

    def __len__(self) -> int:
        return len(self.references)

    @property
    def tiers(self) -> list[str]:
        known = [t for t in KNOWN_TIERS if t in self.by_tier]
        return known + sorted(t for t in self.by_tier if t not in KNOWN_TIERS)

    @classmethod
    def from_folder(cls, root: str | Path) -> "ReferencePool":
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"reference pool folder {root} does not exist")
        refs: list[Reference] = []
        if (rows := metadata_rows(root)) is not None:
            for row in rows:
                path = _image_path(root, row["file_name"])
                rel = path.relative_to(root)
                refs.append(Reference(rel.as_posix(), str(row.get("tier") or _tier_of(rel)), _as_png(path)))
            return cls(refs)
        for path in sorted(root.rglob("*")):
            if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            refs.append(Reference(rel.as_posix(), _tier_of(rel), _as_png(path)))
        return cls(refs)

    @classmethod
    def load(cls, source: str | Path = SHIPPED_POOL, revision: str | None = None) -> "ReferencePool":
        """A local folder if `source` exists on disk, else a Hub dataset id."""
        return cls.from_folder(pool_folder(source, revision))

    def draw(self, k: int, seed: int, mix: dict[str, float] | None = None) -> list[Reference]:
        """k distinct references, the same for the same seed (one seed per GRPO group).

        `mix` gives each tier's share (default 50% love / 50% okay); counts are rounded with
        the remainder going to the earlier tiers, and a tier too small (or absent) is topped
        up from the rest of the pool so the draw always has min(k, len(pool)) images.
        """
        rng = random.Random(seed)
        mix = {t: w for t, w in (mix or DEFAULT_MIX).items() if w > 0}
        total = sum(mix.values())
        k = min(k, len(self.references))
        counts = {t: int(k * w / total) for t, w in mix.items()} if total > 0 else {}
        for t in list(mix)[: k - sum(counts.values())]:
            counts[t] += 1
        chosen: list[Reference] = []
        for tier, n in counts.items():
            members = self.by_tier.get(tier, [])
            chosen += rng.sample(members, min(n, len(members)))
        taken = {r.name for r in chosen}
        rest = [r for r in self.references if r.name not in taken]
        chosen += rng.sample(rest, k - len(chosen))
        return chosen
