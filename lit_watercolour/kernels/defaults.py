"""The update's speed settings that win, per model family and device: what `"auto"` (or None) resolves to.

Chosen by measurement (docs/performance.md; the dated tables, with their commands, in docs/results.md):
- dense (every layer full attention, no experts) on CUDA: one row a micro-batch, attention kernel and
  output-projection matmuls kept through checkpointing, decoder layers compiled (regional: one graph
  serves every layer; `kernels.compile.CompiledLayers` checkpoints around the compiled call, and any
  failure to compile, or a warm-up past `policy.compile_budget_s`, falls back to eager with one warning);
- hybrid (Gated DeltaNet layers: the Qwen3.5 family, MoE or not) on CUDA, and MoE (full attention only: not
  measured apart, it follows the measured Qwen3.5-MoE): four rows a micro-batch
  (the linear-attention glue and the experts' routing cost launches per micro-batch, so fewer, larger ones
  win), plain checkpointing (keeping more made the step slower), no compilation (tracing fla's Triton kernels
  did not finish warming up within a run's budget);
- any family on a CPU: eight rows a micro-batch (one group at once, as the offline default config runs: a
  small model's kernels are launch-bound), plain checkpointing, no compilation (it needs a C++ toolchain and
  minutes that a CPU run's small model never wins back).
Explicit values are honoured as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lit_watercolour.kernels.checkpointing import CheckpointKeep

Family = Literal["dense", "moe", "hybrid"]


@dataclass(frozen=True)
class UpdateDefaults:
    """The resolved settings of the update for one model family on one device."""

    family: Family
    device: str
    micro_batch_size: int
    checkpoint_keep: CheckpointKeep
    compile_layers: bool

    def __str__(self) -> str:
        return (f"{self.family} model on {self.device}: micro_batch_size {self.micro_batch_size}, "
                f"checkpoint_keep {self.checkpoint_keep}, compile_layers {self.compile_layers}")


# (family, device type) -> (micro_batch_size, checkpoint_keep, compile_layers)
MEASURED_BEST: dict[tuple[str, str], tuple[int, CheckpointKeep, bool]] = {
    ("dense", "cuda"): (1, "attention+out_proj", True),
    ("hybrid", "cuda"): (4, "inputs", False),
    ("moe", "cuda"): (4, "inputs", False),
}
CPU_BEST: tuple[int, CheckpointKeep, bool] = (8, "inputs", False)


def model_family(config) -> Family:
    """"hybrid" where any layer is linear attention (Gated DeltaNet), else "moe" where it has routed experts, else "dense"."""
    text = config.get_text_config()
    if "linear_attention" in (getattr(text, "layer_types", None) or []):
        return "hybrid"
    return "moe" if getattr(text, "num_experts", 0) else "dense"


def resolve_update_defaults(family: Family, device: str, micro_batch_size: int | None = None,
                            checkpoint_keep: CheckpointKeep | Literal["auto"] = "auto",
                            compile_layers: bool | Literal["auto"] = "auto", quantized: bool = False) -> UpdateDefaults:
    """The update's settings for `family` on `device` ("cuda", "cpu", ... or a torch.device's str): each
    argument left at None / "auto" becomes the measured best (module docstring), an explicit one stays.
    A quantized (bitsandbytes) base is not compiled by default: its matmuls are bitsandbytes' own kernels, which
    Dynamo does not fuse across, and compiling around them has not been measured to pay."""
    device = str(device).split(":")[0]
    mb, keep, compile_ = MEASURED_BEST.get((family, device), CPU_BEST)
    return UpdateDefaults(
        family=family, device=device,
        micro_batch_size=mb if micro_batch_size is None else micro_batch_size,
        checkpoint_keep=keep if checkpoint_keep == "auto" else checkpoint_keep,
        compile_layers=(compile_ and not quantized) if compile_layers == "auto" else bool(compile_layers),
    )
