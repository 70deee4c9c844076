"""`python -m lit_watercolour {fit,validate,predict,sft} --config configs/<name>.yaml`.

The YAML is the interface: `model:` configures GRPOModule (the reward terms, policy, sampling, GRPO,
optimiser), `data:` the subjects, `trainer.callbacks:` the gallery, the run log and checkpointing. `predict`
paints the data's subjects with the policy (a trained adapter via `--ckpt_path` or
`--model.policy.adapter`) into `model.predict_dir`. `sft` fine-tunes the policy on sketches
(`lit_watercolour.sft.SFTModule`, `lit_watercolour.sft_data.SketchDataModule`): its `model:` and `data:` are
those classes', its `trainer:` Lightning's, and the adapter it writes is what `fit` starts from. Without --config fit,
validate and predict read configs/default.yaml, sft configs/sft.yaml. Every option can also come from the environment, named as `--help` shows
(`LIT_WATERCOLOUR_FIT__TRAINER__MAX_STEPS`); a --config or a flag beats the environment. Each option's
`--help` text is its config field's docstring. The run shows one progress bar of optimizer steps; the notices
it filters are in `lit_watercolour/notices.py`, each with its reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jsonargparse import set_parsing_settings
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ProgressBar, TQDMProgressBar
from lightning.pytorch.cli import LightningCLI

from lit_watercolour import notices
from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOModule
from lit_watercolour.sft import SFTModule
from lit_watercolour.sft_data import SketchDataModule


DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"
SUBCOMMANDS = ("fit", "validate", "predict")
SFT_CONFIG = DEFAULT_CONFIG.with_name("sft.yaml")
SFT_HELP = "Supervised fine-tuning on sketches: the warm start whose adapter fit starts from."


class WatercolourCLI(LightningCLI):
    def __init__(self, args=None, run: bool = True) -> None:
        notices.quiet()
        # each config field's docstring is its `--help` text and its `--print_config=comments` comment
        set_parsing_settings(docstring_parse_attribute_docstrings=True)
        argv = sys.argv[1:] if args is None else args
        self.sft_parser_kwargs = default_config_files(argv, {"sft": SFT_CONFIG}).get("sft", {})
        super().__init__(
            GRPOModule,
            PromptDataModule,
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,  # GRPOModule.optim configures them
            parser_kwargs={"default_env": True, "env_prefix": "LIT_WATERCOLOUR", **default_config_files(argv)},
            args=args,
            run=run,
        )

    def _add_subcommands(self, parser, **kwargs) -> None:
        """fit, validate, predict (and test) on GRPOModule; then `sft`: Trainer.fit's arguments on SFTModule and
        SketchDataModule."""
        super()._add_subcommands(parser, **kwargs)
        classes = self._model_class, self._datamodule_class
        self._model_class, self._datamodule_class = SFTModule, SketchDataModule
        try:
            sft = self._prepare_subcommand_parser(self.trainer_class, "fit", description=SFT_HELP, **self.sft_parser_kwargs)
        finally:
            self._model_class, self._datamodule_class = classes
        self._subcommand_parsers["sft"] = sft
        self._subcommand_method_arguments["sft"] = self._subcommand_method_arguments["fit"]
        parser._subcommands_action.add_subcommand("sft", sft, help=SFT_HELP)

    def _run_subcommand(self, subcommand: str) -> None:
        if subcommand == "sft":
            self.trainer.fit(**self._prepare_subcommand_kwargs(subcommand))
        else:
            super()._run_subcommand(subcommand)

    def instantiate_trainer(self, **kwargs) -> Trainer:
        """The trainer, with the step-counting progress bar unless the config disables bars or brings its own."""
        config = self._get(self.config_init, "trainer", default={})
        callbacks = config.get("callbacks") or []
        callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
        if config.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in callbacks):
            kwargs.setdefault("callbacks", [*callbacks, StepProgressBar()])
        return super().instantiate_trainer(**kwargs)


class StepProgressBar(TQDMProgressBar):
    """Counts optimizer steps, `step 12/30`: a run is `max_steps` long and its prompt stream has no epochs."""

    @property
    def train_description(self) -> str:
        return "step"

    def init_train_tqdm(self):
        bar = super().init_train_tqdm()
        bar.unit = "step"
        return bar

    def on_train_epoch_start(self, trainer, *_) -> None:
        bar = self.train_progress_bar
        bar.reset(total=trainer.max_steps if trainer.max_steps > 0 else None)
        bar.n = bar.initial = trainer.global_step  # a resumed run goes on from its step
        bar.set_description(self.train_description)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        bar = self.train_progress_bar
        if bar is not None and self._should_update(trainer.global_step, bar.total):
            bar.n = trainer.global_step
            bar.set_postfix(self.get_metrics(trainer, pl_module))  # refreshes the bar

    def get_metrics(self, trainer, pl_module) -> dict:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)  # the logger's version folder, not a figure of the run
        return metrics


def default_config_files(argv: list[str], configs: dict[str, Path] | None = None) -> dict:
    """Each subcommand's default config (`configs`; None: the offline default for fit, validate and predict) as
    jsonargparse's default_config_files, when no --config is given.

    Only then: jsonargparse lays default_config_files under a --config, so default.yaml's settings
    would leak into every other config's run."""
    if any(a in ("-c", "--config") or a.startswith("--config=") for a in argv):
        return {}
    configs = configs if configs is not None else dict.fromkeys(SUBCOMMANDS, DEFAULT_CONFIG)
    return {command: {"default_config_files": [str(path)]} for command, path in configs.items()}


def main(args: list[str] | None = None) -> WatercolourCLI:
    return WatercolourCLI(args=args)  # None: LightningCLI reads sys.argv itself (given both, it warns)


if __name__ == "__main__":
    main()
