"""The notices a run prints: the ones a user cannot act on are filtered here, and only here.

Each filter names the notice and why it does not apply. Everything else stays: a kernel falling back
(`kernels/compile.py`'s compile fallback, the render pool's SwiftShader fallback), a missing adapter target, a judge
call that failed. Python's default warning filter already prints a warning once per place it is raised.
"""

from __future__ import annotations

import logging
import warnings

import torch


def _not_a_hub_kernel(record: logging.LogRecord) -> bool:
    return "from kernels-community" not in str(record.msg)


# bitsandbytes, when peft imports it, tries to fetch a CPU 4-bit kernel from the Hub (no network here, and an
# untrusted repository) and says so at every start; it then runs its own CPU kernel. Set before that import.
logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_not_a_hub_kernel)


def quiet() -> None:
    """Filter the notices known not to apply to this program, and set what the others ask for."""
    # Lightning's hint to use TF32 on CUDA: the honest answer is to do so. The policy trains in bf16; what
    # runs in float32 there (stand-in models, reward heads) loses nothing that matters from TF32 matmuls.
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")
    # Scripts (the rehearsal, the benchmarks) build the CLI with their own arguments while sys.argv holds
    # the script's own options: LightningCLI warns about both being given, and here that is intended.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended to run from within Python")
    # Lightning 2.6's own pytree helper builds torch's deprecated LeafSpec: theirs to change, harmless here
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)
    # peft reads transformers' deprecated `is_gradient_checkpointing` when it wraps the model: theirs to change
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    # newer transformers renamed `gradient_checkpointing_enable` (the old name stays until v6); policy.py keeps
    # the old name, which every transformers this project supports (>= 5.17) has
    warnings.filterwarnings("ignore", message="`gradient_checkpointing_enable` is deprecated", category=FutureWarning)
    # AdapterCheckpoint is meant to save the state after the step (a resumed run goes on at the next step)
    warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization and every_n_train_steps")
    # each run checkpoints into its own version folder, so a checkpoint restored by `predict` or a resumed fit
    # always comes from another folder than the callback's: its best-k bookkeeping is not needed there
    warnings.filterwarnings("ignore", message="The dirpath has changed from")
    # adverts for Lightning's cloud logging (litlogger) and model hosting, which an offline run does not use
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_not_a_tip)
    # only random-init stand-ins (tiny_models: HPSv3's reward token, the rehearsal's policy head) grow a
    # vocabulary with mean resizing; the real HPSv3 loader passes mean_resizing=False and reads the checkpoint
    logging.getLogger("transformers.modeling_utils").addFilter(_not_mean_resizing)


def _not_a_tip(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("💡 Tip")


def _not_mean_resizing(record: logging.LogRecord) -> bool:
    return "will be initialized from a multivariate normal distribution" not in str(record.msg)
