import io
import json

import pytest
from PIL import Image

from lit_watercolour.rewards.pool import SHIPPED_POOL, ReferencePool


def png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def test_folder_layouts(tmp_path):
    a = tmp_path / "a"
    for tier, n in (("love", 3), ("okay", 4), ("meh", 2)):
        (a / tier).mkdir(parents=True)
        for i in range(n):
            (a / tier / f"{i}.png").write_bytes(png((i, 0, 0)))
    pool = ReferencePool.from_folder(a)
    assert len(pool) == 9 and pool.tiers == ["love", "okay", "meh"]

    b = tmp_path / "b"
    b.mkdir()
    Image.new("RGB", (8, 8), "red").save(b / "x.jpg")
    (b / "y.png").write_bytes(png("blue"))
    (b / "metadata.jsonl").write_text(json.dumps({"file_name": "x.jpg", "tier": "love"}) + "\n"
                                      + json.dumps({"file_name": "y.png", "tier": "okay"}) + "\n"
                                      + json.dumps({"file_name": "meh_z.png"}) + "\n")
    (b / "meh_z.png").write_bytes(png("green"))
    pool = ReferencePool.from_folder(b)
    assert {r.tier for r in pool.references} == {"love", "okay", "meh"}  # meh from the file name
    assert all(r.png.startswith(b"\x89PNG") for r in pool.references)  # jpg converted

    c = tmp_path / "c"
    c.mkdir()
    (c / "love_1.png").write_bytes(png("red"))
    (c / "okay-2.png").write_bytes(png("red"))
    (c / "other.png").write_bytes(png("red"))
    assert sorted(ReferencePool.from_folder(c).by_tier) == ["all", "love", "okay"]
    with pytest.raises(FileNotFoundError):
        ReferencePool.from_folder(tmp_path / "missing")


def test_draw_is_deterministic_and_mixed(tmp_path):
    for tier, n in (("love", 5), ("okay", 5), ("meh", 5)):
        (tmp_path / tier).mkdir()
        for i in range(n):
            (tmp_path / tier / f"{i}.png").write_bytes(png((i, 1, 2)))
    pool = ReferencePool.from_folder(tmp_path)
    first = [r.name for r in pool.draw(4, seed=7)]
    assert first == [r.name for r in pool.draw(4, seed=7)]
    assert [r.tier for r in pool.draw(4, seed=7)] == ["love", "love", "okay", "okay"]
    draws = {tuple(r.name for r in pool.draw(4, seed=s)) for s in range(20)}
    assert len(draws) > 10  # different groups see different references
    assert [r.tier for r in pool.draw(3, seed=1, mix={"meh": 1.0})] == ["meh"] * 3
    topped = pool.draw(8, seed=1, mix={"love": 1.0})  # only 5 love: topped up from the rest
    assert len({r.name for r in topped}) == 8 and sum(r.tier == "love" for r in topped) == 5
    assert len(pool.draw(99, seed=0)) == 15


def test_shipped_pool_has_three_tiers():
    pool = ReferencePool.load(SHIPPED_POOL)
    assert set(pool.tiers) == {"love", "okay", "meh"}
    assert all(len(pool.by_tier[t]) >= 4 for t in pool.tiers)
    meta = [json.loads(line) for line in (SHIPPED_POOL / "metadata.jsonl").read_text().splitlines()]
    assert all((SHIPPED_POOL / m["source"]).exists() for m in meta)  # every render ships its sketch


def recipe_layout(root, metadata: str) -> None:
    """A pool as the recipe's Hub dataset lays it out: images/<tier>_<name>.png (600 px),
    sources/<tier>_<name>.js, metadata.jsonl; `metadata` picks how its rows name the images."""
    (root / "images").mkdir(parents=True)
    (root / "sources").mkdir()
    rows = []
    for tier, n in (("love", 3), ("okay", 4)):
        for i in range(n):
            name = f"{tier}_cand_{i:03d}"
            Image.new("RGB", (600, 600), (200, 10 * i, 90)).save(root / "images" / f"{name}.png")
            (root / "sources" / f"{name}.js").write_text("async function setup() { createCanvas(600, 600, WEBGL); }\n")
            row = {"file_name": f"images/{name}.png", "tier": tier} if metadata == "file_name" else {"file": f"{name}.png", "model": "glm"}
            rows.append(json.dumps(row) + "\n")
    if metadata != "none":
        (root / "metadata.jsonl").write_text("".join(rows))


@pytest.mark.parametrize("metadata", ["file_name", "file", "none"])
def test_recipe_hub_layout_loads_and_draws_two_and_two(tmp_path, metadata):
    recipe_layout(tmp_path, metadata)
    pool = ReferencePool.load(tmp_path)  # the path Hub snapshots take too (pool_folder -> from_folder)
    assert len(pool) == 7 and pool.tiers == ["love", "okay"]
    assert all(r.name.startswith("images/") for r in pool.references)  # never a tier called "images"
    draw = pool.draw(4, seed=11)
    assert sorted(r.tier for r in draw) == ["love", "love", "okay", "okay"] and len({r.name for r in draw}) == 4
    assert all(Image.open(io.BytesIO(r.png)).size == (600, 600) for r in draw)
    assert [r.name for r in draw] == [r.name for r in ReferencePool.load(tmp_path).draw(4, seed=11)]


def test_bad_pool_metadata_is_a_clear_error(tmp_path):
    recipe_layout(tmp_path, "file_name")
    with open(tmp_path / "metadata.jsonl", "a") as f:
        f.write(json.dumps({"file_name": "images/love_missing.png", "tier": "love"}) + "\n")
    with pytest.raises(FileNotFoundError, match="love_missing.png"):
        ReferencePool.from_folder(tmp_path)
    (tmp_path / "metadata.jsonl").write_text('{"file_name": "images/love_cand_000.png"}\nnot json\n')
    with pytest.raises(ValueError, match="metadata.jsonl:2"):
        ReferencePool.from_folder(tmp_path)
