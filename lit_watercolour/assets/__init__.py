"""Files shipped inside the package: the tiny pre-trained policy of the offline default."""

from pathlib import Path

# a transformers folder (Qwen3, ~2M parameters, bf16) built by scripts/make_tiny_policy.py
TINY_POLICY = Path(__file__).resolve().parent / "tiny_policy"
