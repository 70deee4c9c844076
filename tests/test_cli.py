"""The entry point, as a user runs it: `python -m lit_watercolour fit|predict --config ...`."""

import dataclasses
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from lit_watercolour.__main__ import WatercolourCLI, main
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOModule
from lit_watercolour.sft import SFTModule
from lit_watercolour.sft_data import SketchDataModule

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(2400)  # a hang guard, above the fits' own: a loaded box reaches tighter ones


def printed_config(capsys, args: list[str]) -> str:
    """`fit ... --print_config` in this process: parsing the config needs no fresh interpreter (the fit and
    predict runs go through `python -m lit_watercolour` itself)."""
    with pytest.raises(SystemExit) as done:
        main(["fit", *args])
    assert done.value.code in (0, None)
    return capsys.readouterr().out


def test_fit_then_predict_with_the_trained_adapter(judged_fit, painter):
    """The fit is conftest's `judged_fit` (the tiny painter, 2 steps, a progress bar); test_secrets reads it too."""
    fit, cwd = judged_fit.run, judged_fit.cwd
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert "step: 100%" in fit.stdout and "2/2" in fit.stdout and "Epoch" not in fit.stdout  # the bar counts steps
    for notice in ("args and command line", "Tip", "multivariate normal", "set_float32_matmul_precision"):
        assert notice not in fit.stdout + fit.stderr  # filtered or answered in lit_watercolour/notices.py
    out = cwd / "runs" / "tiny_random"
    assert (out / "checkpoints" / "last.ckpt").exists()
    assert (out / "checkpoints" / "last-adapter" / "adapter_model.safetensors").exists()
    logs = out / "lightning_logs" / "version_0"
    assert yaml.safe_load((logs / "config.yaml").read_text())["trainer"]["max_steps"] == 2  # the resolved config is kept
    rows = (logs / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "reward" in rows[0].split(",")  # a header and one row per step

    # the fit's own config, which names both subjects (the fit itself was given one on the command line)
    args = ["predict", "--config", "config.yaml", "--model.policy.tiny", "null", "--model.policy.model", str(painter),
            "--ckpt_path", str(out / "checkpoints" / "last.ckpt"), "--model.predict_dir", str(cwd / "paintings")]
    predict = subprocess.run([sys.executable, "-m", "lit_watercolour", *args], cwd=cwd, env=judged_fit.env,
                             capture_output=True, text=True, timeout=1800)  # a hang guard, never a speed bound
    assert predict.returncode == 0, predict.stderr[-3000:]
    painted = sorted(p.name for p in (cwd / "paintings").iterdir())
    assert "a-peach-hibiscus-0-0.txt" in painted and "a-blue-iris-1-0.txt" in painted


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_every_shipped_config_parses(capsys, config):
    """Each config resolves under its subcommand (`sft` for the SFT ones) without loading a model: a renamed or
    removed option fails here, not in a user's run."""
    subcommand = "sft" if "sft" in config else "fit"
    with pytest.raises(SystemExit) as done:
        main([subcommand, "--config", str(ROOT / "configs" / config), "--print_config"])
    assert done.value.code in (0, None)
    assert yaml.safe_load(capsys.readouterr().out)["model"]


def test_recipe_config_parses(capsys):
    """The H200 recipe resolves to the documented settings without loading the 35B model."""
    c = yaml.safe_load(printed_config(capsys, ["--config", str(ROOT / "configs" / "hibiscus_qwen35_a3b.yaml"), "--print_config"]))
    m = c["model"]
    assert m["policy"]["model"] == "Qwen/Qwen3.5-35B-A3B" and m["policy"]["dtype"] == "bfloat16"
    assert (m["policy"]["lora_r"], m["policy"]["lora_alpha"], m["policy"]["lora_dropout"]) == (16, 32, 0.0)
    assert m["policy"]["target_modules"] == "all-linear" and m["policy"]["gradient_checkpointing"]
    assert (m["sampling"]["top_p"], m["sampling"]["top_k"], m["sampling"]["max_completion_length"]) == (0.95, 20, 8192)
    assert m["grpo"]["num_generations"] == 8 and m["grpo"]["micro_batch_size"] is None
    assert m["grpo"]["scale_rewards"] == "none"
    assert (m["optim"]["lr"], m["optim"]["lr_scheduler"], m["optim"]["warmup_steps"]) == (5e-5, "constant_with_warmup", 5)
    assert c["trainer"]["max_steps"] == 110 and c["data"]["subjects"] == ["a peach hibiscus"]
    terms = {cb["class_path"].rsplit(".", 1)[-1]: cb["init_args"] for cb in c["model"]["rewards"]}
    assert {"GateTerm", "LengthTerm", "JudgeTerm", "HPSv3Term"} <= set(terms)
    assert terms["JudgeTerm"]["references"] == 4


def test_default_config_and_environment(monkeypatch, capsys):
    """No --config reads configs/default.yaml, which LIT_WATERCOLOUR_<SUBCOMMAND>__<KEY> variables override;
    a --config replaces the default whole (none of default.yaml's settings leak into it)."""
    monkeypatch.setenv("LIT_WATERCOLOUR_FIT__TRAINER__MAX_STEPS", "7")
    monkeypatch.setenv("LIT_WATERCOLOUR_FIT__MODEL__RENDER_POOL_SIZE", "5")
    printed = printed_config(capsys, ["--print_config=comments"])
    assert "# The adapter's rank." in printed  # each field's docstring as its comment
    c = yaml.safe_load(printed)
    assert c["trainer"]["logger"]["init_args"]["name"] == "default"
    assert c["trainer"]["max_steps"] == 7 and c["model"]["render_pool_size"] == 5
    assert c["model"]["render"]["pixel_density"] == 0.5

    c = yaml.safe_load(printed_config(capsys, ["--config", str(ROOT / "configs" / "tiny_random.yaml"), "--print_config"]))
    assert c["trainer"]["logger"]["init_args"]["save_dir"] == "runs/tiny_random"
    assert c["trainer"]["logger"]["init_args"]["name"] == "lightning_logs" and c["model"]["render"]["pixel_density"] == 1.0
    assert c["trainer"]["max_steps"] == 3 and c["model"]["render_pool_size"] == 2  # the config beats the environment


class Parser(Exception):
    """Carries the CLI's parser out before it parses anything."""


class ParserOnly(WatercolourCLI):
    def parse_arguments(self, parser, args):
        raise Parser(parser)


@pytest.mark.parametrize("subcommand, classes", [("fit", (GRPOModule, PromptDataModule)),
                                                 ("sft", (SFTModule, SketchDataModule))])
def test_every_option_says_what_it_does(subcommand, classes):
    """`fit --help` and `sft --help` show a sentence for every parameter of their module and data module and every
    field of their config dataclasses: a new option without a docstring fails here."""
    with pytest.raises(Parser) as caught:
        ParserOnly(args=[subcommand])
    parser = caught.value.args[0]._subcommands_action._name_parser_map[subcommand]
    helps = {a.dest: a.help for a in parser._actions}
    titles = {g.dest: g.title for g in parser._action_groups if getattr(g, "dest", None)}
    undocumented = []
    for prefix, cls in zip(("model", "data"), classes):
        hints = typing.get_type_hints(cls.__init__)
        for name in list(inspect.signature(cls.__init__).parameters)[1:]:
            key = f"{prefix}.{name}"
            if dataclasses.is_dataclass(hints[name]):
                config = hints[name]
                if titles.get(key, "").startswith((config.__name__, "<class")):  # jsonargparse's fallback title
                    undocumented.append(key)
                undocumented += [f"{key}.{f.name}" for f in dataclasses.fields(config) if not helps.get(f"{key}.{f.name}")]
            elif not helps.get(key):
                undocumented.append(key)
    assert not undocumented, f"add a docstring for: {undocumented}"


@pytest.mark.parametrize("option, value", [("model.grpo.num_generations", "1"), ("model.grpo.epsilon", "-1"),
                                           ("model.sampling.top_p", "0"), ("model.optim.lr", "0"),
                                           ("model.policy.lora_r", "0"), ("model.render_pool_size", "0")])
def test_a_value_out_of_bounds_fails_when_the_config_is_read_naming_its_option(option, value):
    """Before any model loads: a group of one would train on zero advantages, a negative clip range would pass."""
    with pytest.raises(ValueError, match=rf"^{re.escape(option)} must be .*, not -?{value}"):
        WatercolourCLI(args=[f"--{option}", value], run=False)
