"""The gallery: first against last snapshot, every snapshot reachable, each painting beside its code and
terms, in one HTML file that opens offline (checked in Chromium); the curves are the logger's."""

import json
import subprocess
import sys
from io import BytesIO
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from lit_watercolour.callbacks.gallery import contact_sheet, early_late_picture, monitor_line, write_gallery
from lit_watercolour.sandbox import chromium_executable

ROOT = Path(__file__).resolve().parents[1]
STEPS = [1, 4, 8, 12]


def painting(colour: str) -> bytes:
    img = Image.new("RGB", (256, 256), "#fbf7ee")
    ImageDraw.Draw(img).ellipse((60, 60, 200, 200), fill=colour)
    buf = BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def run_gallery(tmp_path):
    """A gallery folder as RenderGallery leaves it: 4 snapshots of 4 paintings."""
    entries = []
    for step in STEPS:
        (tmp_path / f"step_{step:05d}").mkdir()
        pngs = []
        for i in range(4):
            passed = not (step == 1 and i == 3)
            png = painting(["#f08a6c", "#6b5b4b", "#c2185b", "#7aa35a"][i]) if passed else None
            pngs.append(png)
            if png:
                (tmp_path / f"step_{step:05d}" / f"{i:02d}.png").write_bytes(png)
            entries.append({"step": step, "index": i, "subject": "a peach hibiscus", "reward": 0.5 + step / 100 if passed else 0.0,
                            "terms": {"gate": float(passed), "image_stats": 0.6 if passed else 0.0}, "gate": "ok" if passed else "blank_canvas",
                            "detail": "" if passed else "0.1% painted", "png": f"step_{step:05d}/{i:02d}.png" if png else None,
                            "code": f"function setup() {{ /* step {step} painting {i} <&> */ }}",
                            "monitors": f"text hits {step}"})
        contact_sheet(pngs, [str(i) for i in range(4)]).save(tmp_path / f"contact_step_{step:05d}.png")
    (tmp_path / "gallery.json").write_text(json.dumps(entries))
    return tmp_path, entries


def test_gallery_holds_the_first_and_last_snapshot_and_points_at_the_curves(run_gallery):
    folder, entries = run_gallery
    page = write_gallery(folder, entries).read_text()
    assert "<svg" not in page and 'href="../metrics.csv"' in page  # curves: the logger's files, beside the gallery
    side = page[page.index("Earliest against latest"):page.index("Every snapshot")]
    assert 'href="#step-1"' in side and 'href="#step-12"' in side
    assert "3/4 pass the gate" in side and "mean reward 0.620, 4/4 pass the gate" in side
    for step in STEPS:  # every snapshot reachable from the navigation, each with its four cards
        assert f'<a href="#step-{step}">' in page and f'<section id="step-{step}">' in page
    assert page.count("<div class=card>") == 16
    assert "/* step 12 painting 2 &lt;&amp;&gt; */" in page  # code beside each painting, escaped
    assert "failed: blank_canvas 0.1% painted" in page
    assert page.count("data:image/jpeg;base64,") == 15 + 7  # 15 cards + 3 + 4 tiles side by side: all inlined


def test_gallery_opens_offline_in_chromium(run_gallery, tmp_path_factory):
    """Loaded from a copy with no image files beside it, in headless Chromium: everything shows, nothing is fetched."""
    from playwright.sync_api import sync_playwright

    folder, entries = run_gallery
    alone = tmp_path_factory.mktemp("alone") / "gallery.html"
    alone.write_text(write_gallery(folder, entries).read_text())
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), headless=True)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.goto(alone.as_uri())
            shown = page.evaluate("""() => ({
                images: [...document.images].filter(i => i.complete && i.naturalWidth === 256).length,
                sections: document.querySelectorAll('section[id^=step-]').length})""")
        finally:
            browser.close()
    assert shown["sections"] == len(STEPS)
    assert shown["images"] == 15 + 7  # every inlined thumbnail decoded
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []


def test_early_late_picture_and_rebuild_from_the_folder(run_gallery):
    folder, entries = run_gallery
    picture = early_late_picture(folder, entries)
    sheet = Image.open(folder / "contact_step_00001.png")
    assert picture.width > 2 * sheet.width and picture.height == sheet.height + 24
    done = subprocess.run([sys.executable, "-m", "lit_watercolour.callbacks.gallery", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)  # a hang guard, never a speed bound
    assert done.returncode == 0, done.stderr
    assert (folder / "early_vs_late.png").exists() and 'id="step-12"' in (folder / "gallery.html").read_text()


def test_each_snapshot_has_a_line_of_reward_hacking_monitors(run_gallery):
    folder, entries = run_gallery
    html = write_gallery(folder, entries).read_text()
    for step in STEPS:
        section = html[html.index(f'id="step-{step}"'):]
        assert section.index(f"reward-hacking monitors: text hits {step}<") < section.index("class=card")
    metrics = {"gate/reason_ok": 0.75, "gate/reason_text": 0.125, "gate/reason_timeout": 0.125, "gate/reason_dom": 0.0,
               "gate/text_hits": 1.0, "reward/judge/order_disagreement": 0.0625, "reward/judge/win_rate": 0.4}
    assert monitor_line(metrics) == ("gate reasons ok 75%, text 12%, timeout 12%; text hits 1; "
                                     "judge order disagreement 0.062")
    assert monitor_line({}) == "gate reasons none"  # a step that logged none of them
