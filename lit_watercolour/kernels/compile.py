"""torch.compile where it pays and where it works: compiled functions and decoder layers that fall back to eager.

`compile_decoder_layers` is regional compilation (torch's "Reducing torch.compile cold start compilation time
with regional compilation" recipe): every decoder layer runs the same code, so compiling each layer's call
compiles one graph that all of them reuse, in seconds a layer class rather than minutes a model. Its
warm-up is bounded: compilation that fails, or whose seconds pass a budget, sends the layers back to eager
with one warning. Inductor's cache lives in a folder kept between runs (`use_compile_cache`), so a
second run of the same model loads its kernels instead of compiling them.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import torch

DEFAULT_CACHE_DIR = "~/.cache/lit_watercolour/torch_compile"


class _CompileClock:
    """Seconds torch.compile has spent in this process: Dynamo's frames and the lazily compiled backward graphs."""

    def __init__(self) -> None:
        self.total, self._started = 0.0, None

    def install(self) -> None:
        from torch._dynamo.callback import callback_handler

        if self._start not in callback_handler.start_callbacks:  # `torch._dynamo.reset()` clears them
            callback_handler.register_start_callback(self._start)
            callback_handler.register_end_callback(self._end)

    def _start(self, *_) -> None:
        self._started = time.perf_counter()

    def _end(self, *_) -> None:
        if self._started is not None:
            self.total += time.perf_counter() - self._started
            self._started = None


COMPILE_CLOCK = _CompileClock()


def compile_seconds() -> float:
    """Seconds spent compiling in this process so far (0 until something is compiled here)."""
    return COMPILE_CLOCK.total


def use_compile_cache(cache_dir: str | None) -> str:
    """Point Inductor's on-disk cache (FX graphs, AOTAutograd graphs, Triton kernels) at `cache_dir`, or
    where `$TORCHINDUCTOR_CACHE_DIR` says, else `DEFAULT_CACHE_DIR`: a folder kept between runs. Returns it."""
    path = cache_dir or os.environ.get("TORCHINDUCTOR_CACHE_DIR") or DEFAULT_CACHE_DIR
    path = str(Path(path).expanduser())
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path


def compiled_or_eager(fn):
    """fn compiled; where compiling fails (no working toolchain), fn itself, with a warning: same numbers, slower."""
    COMPILE_CLOCK.install()
    compiled = torch.compile(fn, dynamic=True)

    def run(*args):
        nonlocal compiled
        try:
            return compiled(*args)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            if compiled is fn:
                raise
            warnings.warn(f"torch.compile of {fn.__name__} failed ({type(e).__name__}: {str(e)[:300]}); running it eagerly")
            compiled = fn
            return fn(*args)

    return run


def _backward_compiled_with_forward():
    """AOTAutograd compiles the backward graph with the forward instead of in the first backward, where a failure
    could no longer fall back (torch builds without the switch: lazily, as before)."""
    config = torch._functorch.config
    if not hasattr(config, "force_non_lazy_backward_lowering"):
        return nullcontext()
    return config.patch(force_non_lazy_backward_lowering=True)


class CompiledLayers:
    """Decoder layers whose calls run through torch.compile while gradients are on (the update's forward
    and its checkpointed recomputation); sampling and no-grad passes run them eagerly, since decoding
    with a KV cache would compile graphs of its own.

    Gradient checkpointing moves outside the compiled region: each layer's call is checkpointed here
    (`LayerCall`), with the checkpoint function (and selective policy) transformers was given, around the
    compiled call, whether the transformers version checkpoints inside `__call__` or inside `forward`. So
    backward recomputes by rerunning the very graph the forward ran, the checkpoint's own signal (its early
    stop raises out of the recomputed function) never meets the fallback, and a compilation that fails leaves
    no checkpoint half-recorded: the eager retry runs in a checkpoint of its own. The first compilation that
    fails, or one that ends with more than `budget_s` seconds compiled since these layers were wrapped, puts
    every layer on its eager call for good, with one warning. The backward graph compiles with the forward
    (not lazily in the first backward), so its failure falls back too."""

    def __init__(self, layers: torch.nn.ModuleList, budget_s: float) -> None:
        COMPILE_CLOCK.install()
        self.layers, self.budget_s = list(layers), budget_s
        self.started = compile_seconds()
        self.eager_because: str | None = None
        self.first_calls: set[int] | None = set()  # layers run once; None once the warm-up is reported
        try:
            compiled = [torch.compile(layer._call_impl, dynamic=True) for layer in self.layers]
        except Exception as e:  # torch.compile itself refused (an unsupported Python, say)
            self.fall_back(f"torch.compile failed ({type(e).__name__}: {str(e)[:300]})")
            return
        for layer, fn in zip(self.layers, compiled):
            checkpoint = layer._gradient_checkpointing_func if getattr(layer, "gradient_checkpointing", False) else None
            layer.gradient_checkpointing = False  # checkpointed by `LayerCall`, around the compiled call, from now on
            # nn.Module.compile's hook: the module's call goes through `_compiled_call_impl` when it is set
            layer._compiled_call_impl = LayerCall(self, layer, fn, checkpoint)

    def compiled_s(self) -> float:
        """Seconds compiled in this process since the layers were wrapped."""
        return compile_seconds() - self.started

    def compiled_call_ended(self, layer: torch.nn.Module) -> None:
        """Past the budget, eager from here on; else, when a layer runs a second time (the first pass's forward
        and backward are over, and with them the warm-up: one graph serves every layer), one line in the run's log."""
        if self.compiled_s() > self.budget_s:
            self.fall_back(f"compilation took {self.compiled_s():.0f} s, past policy.compile_budget_s ({self.budget_s:.0f} s)")
        elif self.first_calls is not None and id(layer) not in self.first_calls:
            self.first_calls.add(id(layer))
        elif self.first_calls is not None:
            self.first_calls = None
            from lightning.pytorch.utilities import rank_zero_info

            rank_zero_info(f"policy.compile_layers: the decoder layers compiled in {self.compiled_s():.1f} s, the first "
                           f"step's warm-up (Inductor's cache: {os.environ.get('TORCHINDUCTOR_CACHE_DIR', 'its default')})")

    def fall_back(self, why: str) -> None:
        self.eager_because = why
        warnings.warn(f"policy.compile_layers: {why}; the decoder layers run eagerly from here on (same numbers, "
                      "slower)", stacklevel=3)


class LayerCall:
    """One decoder layer's call (its `_compiled_call_impl`): with gradients on, checkpointed as transformers
    would, around its compiled call while `owner` compiles, else around its eager one. Gradient checkpointing
    stays with it even after a fallback: a checkpoint recorded before it recomputes with the graph it recorded."""

    def __init__(self, owner: CompiledLayers, layer: torch.nn.Module, compiled, checkpoint) -> None:
        self.owner, self.layer, self.compiled, self.checkpoint = owner, layer, compiled, checkpoint

    @property
    def compiling(self) -> bool:
        return self.owner.eager_because is None

    def run(self, fn, args, kwargs):
        fn = partial(fn, **kwargs)
        return self.checkpoint(fn, *args) if self.checkpoint is not None and self.layer.training else fn(*args)

    def __call__(self, *args, **kwargs):
        if not torch.is_grad_enabled():
            return self.layer._call_impl(*args, **kwargs)
        if self.compiling:
            try:
                with _backward_compiled_with_forward():
                    out = self.run(self.compiled, args, kwargs)
            except torch.OutOfMemoryError:
                raise
            except Exception as e:
                self.owner.fall_back(f"compiling a decoder layer failed ({type(e).__name__}: {str(e)[:300]})")
            else:
                self.owner.compiled_call_ended(self.layer)
                return out
        return self.run(self.layer._call_impl, args, kwargs)


def keep_eager(module: torch.nn.Module) -> None:
    """Leave `module`'s forward out of any compiled region around it (a graph break): for modules whose own
    kernels (fla's Triton Gated DeltaNet) Dynamo should call, not trace."""
    module.forward = torch.compiler.disable(module.forward, recursive=True)


def compile_decoder_layers(layers: torch.nn.ModuleList, budget_s: float) -> CompiledLayers:
    """Regional compilation of `layers` (module docstring). Linear-attention (Gated DeltaNet) modules inside
    them stay eager: the layer's norms, attention and MLP glue are compiled around them."""
    for layer in layers:
        for name, module in layer.named_modules():
            if type(module).__name__.endswith("GatedDeltaNet"):
                keep_eager(module)
    return CompiledLayers(layers, budget_s)
