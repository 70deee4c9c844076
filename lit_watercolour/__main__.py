"""`python -m lit_watercolour {fit,validate,predict} --config configs/<name>.yaml`.

The YAML is the interface: `model:` configures GRPOModule (the reward terms, policy, sampling, GRPO,
optimiser), `data:` the subjects, `trainer.callbacks:` the gallery, the run log and checkpointing. `predict`
paints the data's subjects with the policy (a trained adapter via `--ckpt_path` or
`--model.policy.adapter`) into `model.predict_dir`. Without --config the subcommands read
configs/default.yaml. Every option can also come from the environment, named as `--help` shows
(`LIT_WATERCOLOUR_FIT__TRAINER__MAX_STEPS`); a --config or a flag beats the environment.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

from lightning.pytorch.cli import LightningCLI

from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOModule


DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"
SUBCOMMANDS = ("fit", "validate", "predict")


class WatercolourCLI(LightningCLI):
    def __init__(self, args=None, run: bool = True) -> None:
        argv = sys.argv[1:] if args is None else args
        super().__init__(
            GRPOModule,
            PromptDataModule,
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,  # GRPOModule.optim configures them
            parser_kwargs={"default_env": True, "env_prefix": "LIT_WATERCOLOUR", **default_config_files(argv)},
            args=args,
            run=run,
        )


def default_config_files(argv: list[str]) -> dict:
    """The offline default config as jsonargparse's default_config_files, when no --config is given.

    Only then: jsonargparse lays default_config_files under a --config, so default.yaml's settings
    would leak into every other config's run."""
    if any(a in ("-c", "--config") or a.startswith("--config=") for a in argv):
        return {}
    return {command: {"default_config_files": [str(DEFAULT_CONFIG)]} for command in SUBCOMMANDS}


def quiet_known_warnings() -> None:
    """Silence the notices that are known not to apply to this program, each for the reason given."""
    # Lightning 2.6's own pytree helper builds torch's deprecated LeafSpec: theirs to change, harmless here
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)
    # peft reads transformers' deprecated `is_gradient_checkpointing` when it wraps the model: theirs to change
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    # AdapterCheckpoint is meant to save the state after the step (a resumed run goes on at the next step)
    warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization and every_n_train_steps")
    # adverts for Lightning's cloud logging and model hosting, which an offline run does not use
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda record: not str(record.msg).startswith("💡 Tip"))


def main(args: list[str] | None = None) -> WatercolourCLI:
    quiet_known_warnings()
    return WatercolourCLI(args=args)  # None: LightningCLI reads sys.argv itself (given both, it warns)


if __name__ == "__main__":
    main()
