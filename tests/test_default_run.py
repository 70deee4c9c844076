"""The offline main job as `make fit` runs it (README: The offline run): the default config, no --config given."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(2400)  # a hang guard, above the fits' own: a loaded box reaches tighter ones


def test_default_fit_logs_rewards_and_writes_a_gallery(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run_dir = tmp_path / "run"
    args = ["fit", "--trainer.max_steps", "2", "--trainer.default_root_dir", str(run_dir),
            "--trainer.logger.init_args.save_dir", str(run_dir),
            "--model.policy.model", str(ROOT / "lit_watercolour" / "assets" / "tiny_policy")]
    fit = subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1800)  # a hang guard, never a speed bound
    assert fit.returncode == 0, fit.stderr[-3000:]
    logs = run_dir / "default" / "version_0"
    rows = list(csv.DictReader((logs / "metrics.csv").open()))
    assert len(rows) == 2
    for row in rows:
        assert 0.0 <= float(row["gate/pass_rate"]) <= 1.0
        assert 0.0 <= float(row["reward"]) <= 1.0
        assert float(row["reward/image_stats/mean"]) > 0.0  # the shipped policy paints: the scorer saw renders
        assert float(row["gate/reason_ok"]) == float(row["gate/pass_rate"]) and float(row["gate/text_hits"]) >= 0.0
    assert float(rows[0]["gate/pass_rate"]) > 0.0

    gallery = logs / "gallery"
    html = (gallery / "gallery.html").read_text()
    entries = json.loads((gallery / "gallery.json").read_text())
    assert len(entries) == 16 and {e["step"] for e in entries} == {1, 2}  # a group of 8 at the first and the last step
    painted = [e for e in entries if e["png"]]
    assert painted and all((gallery / e["png"]).stat().st_size > 1000 for e in painted)
    assert all(e["png"] in html for e in painted)
    assert (gallery / "contact_step_00001.png").exists() and (gallery / "contact_step_00002.png").exists()
    # the curves are the logger's (the page points at them), and both the first and last snapshot, side by side
    # and each reachable
    assert 'href="../metrics.csv"' in html  # gallery/ sits beside metrics.csv in the version folder
    assert 'id="step-1"' in html and 'id="step-2"' in html
    assert html.count("reward-hacking monitors: gate reasons") == 2  # a line under each snapshot
    side = html[html.index("Earliest against latest"):html.index("Every snapshot")]
    assert 'href="#step-1"' in side and 'href="#step-2"' in side
    assert len(list((run_dir / "default" / "renders" / "step_00002").glob("*.png"))) == len(
        [e for e in entries if e["step"] == 2 and e["png"]])  # every step's renders kept for export
    # checkpoints live in the run's own version folder (no seed or later run shares them), and the
    # output holds no warning: every one left is either fixed or filtered with its reason in lit_watercolour/notices.py
    assert (logs / "checkpoints" / "last.ckpt").exists() and (logs / "checkpoints" / "last-adapter").is_dir()
    output = fit.stdout + fit.stderr
    assert "warn" not in output.lower(), output[-3000:]
