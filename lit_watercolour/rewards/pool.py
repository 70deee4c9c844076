"""The reference pool: watercolour renders with quality tiers, drawn deterministically per seed.

A pool is a folder of PNG/JPEG/WebP images with tiers given by, in order of precedence:
  1. `metadata.jsonl`, one JSON object per line with `file_name` and `tier` (a row without a
     tier falls back to 2 and 3 for its file);
  2. subfolders named after tiers (`love/`, `okay/`, `meh/`);
  3. a filename prefix (`love_003.png`, `okay-12.png`);
otherwise every image is in tier "all". A Hub dataset (the recipe's is
`HuggingEnvs/watercolour-reference-pool`, tiers love/okay) is snapshot-downloaded and read
by the same folder loader.
"""

from __future__ import annotations

import io
import json
import random
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
    """The tier a path implies: its top folder, else a known filename prefix, else "all"."""
    if len(rel.parts) > 1:
        return rel.parts[0]
    head = rel.stem.replace("-", "_").split("_", 1)[0].lower()
    return head if head in KNOWN_TIERS else "all"


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
        meta = root / "metadata.jsonl"
        refs: list[Reference] = []
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    tier = row.get("tier") or _tier_of(Path(row["file_name"]))
                    refs.append(Reference(row["file_name"], str(tier), _as_png(root / row["file_name"])))
            return cls(refs)
        for path in sorted(root.rglob("*")):
            if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            refs.append(Reference(rel.as_posix(), _tier_of(rel), _as_png(path)))
        return cls(refs)

    @classmethod
    def from_hub(cls, repo_id: str, revision: str | None = None, cache_dir: str | None = None) -> "ReferencePool":
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo_id, repo_type="dataset", revision=revision, cache_dir=cache_dir,
                                 allow_patterns=["*.png", "*.jpg", "*.jpeg", "*.webp", "*.jsonl"])
        return cls.from_folder(path)

    @classmethod
    def load(cls, source: str | Path = SHIPPED_POOL, revision: str | None = None) -> "ReferencePool":
        """A local folder if `source` exists on disk, else a Hub dataset id."""
        if Path(source).exists():
            return cls.from_folder(source)
        return cls.from_hub(str(source), revision=revision)

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
