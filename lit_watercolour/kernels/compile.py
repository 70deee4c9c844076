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


class CompiledLayers:
    """Decoder layers whose calls run through torch.compile while gradients are on (the update's forward
    and its checkpointed recomputation); sampling and no-grad passes run them eagerly, since decoding
    with a KV cache would compile graphs of its own. The first compilation that fails, or a
    compilation that ends with more than `budget_s` seconds compiled since these layers were wrapped,
    puts every layer back on its eager call for good, with one warning."""

    def __init__(self, layers: torch.nn.ModuleList, budget_s: float) -> None:
        COMPILE_CLOCK.install()
        self.layers, self.budget_s = list(layers), budget_s
        self.started = compile_seconds()
        self.eager_because: str | None = None
        try:
            for layer in self.layers:
                # nn.Module.compile's hook: the module's call goes through `_compiled_call_impl` when it is set
                layer._compiled_call_impl = self._runner(layer, torch.compile(layer._call_impl, dynamic=True))
        except Exception as e:  # torch.compile itself refused (an unsupported Python, say)
            self.fall_back(f"torch.compile failed ({type(e).__name__}: {str(e)[:300]})")

    def compiled_s(self) -> float:
        """Seconds compiled in this process since the layers were wrapped."""
        return compile_seconds() - self.started

    def _runner(self, layer: torch.nn.Module, compiled):
        def run(*args, **kwargs):
            if self.eager_because is None and torch.is_grad_enabled():
                try:
                    out = compiled(*args, **kwargs)
                except torch.OutOfMemoryError:
                    raise
                except Exception as e:
                    self.fall_back(f"compiling a decoder layer failed ({type(e).__name__}: {str(e)[:300]})")
                else:
                    if self.compiled_s() > self.budget_s:
                        self.fall_back(f"compilation took {self.compiled_s():.0f} s, past policy.compile_budget_s "
                                       f"({self.budget_s:.0f} s)")
                    return out
            return layer._call_impl(*args, **kwargs)

        return run

    def fall_back(self, why: str) -> None:
        self.eager_because = why
        for layer in self.layers:
            layer._compiled_call_impl = None
        warnings.warn(f"policy.compile_layers: {why}; the decoder layers run eagerly from here on (same numbers, "
                      "slower)", stacklevel=2)


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
