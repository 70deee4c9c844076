"""`python -m lit_watercolour {fit,validate,predict} --config configs/<name>.yaml`.

The YAML is the interface: `model:` configures GRPOModule (policy, sampling, GRPO, optimiser),
`data:` the subjects, `trainer.callbacks:` the reward terms and checkpointing. `predict`
paints the data's subjects with the policy (a trained adapter via `--ckpt_path` or
`--model.policy.adapter`) into `model.predict_dir`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lightning.pytorch.cli import LightningCLI

from lit_watercolour.data import PromptDataModule
from lit_watercolour.module import GRPOModule


# `fit` with no --config runs the offline default; other configs replace it.
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


class WatercolourCLI(LightningCLI):
    def __init__(self, args=None, run: bool = True) -> None:
        super().__init__(
            GRPOModule,
            PromptDataModule,
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,  # GRPOModule.optim configures them
            parser_kwargs={"default_env": True},
            args=args,
            run=run,
        )


def with_default_config(args: list[str]) -> list[str]:
    """`fit` (validate, predict) without --config means the offline default config."""
    if args and args[0] in ("fit", "validate", "predict") and not any(a.startswith("--config") for a in args):
        return [args[0], "--config", str(DEFAULT_CONFIG), *args[1:]]
    return args


def main(args: list[str] | None = None) -> WatercolourCLI:
    return WatercolourCLI(args=with_default_config(sys.argv[1:] if args is None else args))


if __name__ == "__main__":
    main()
