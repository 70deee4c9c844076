"""The random generators sampling draws from, saved in checkpoints so a resumed run draws what the
uninterrupted one would (Lightning keeps loops and optimizers, not generators)."""

from __future__ import annotations

import random

import numpy as np
import torch


def rng_state() -> dict:
    """Every generator sampling touches, in a form `torch.load(weights_only=True)` reads."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy = (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss)  # loadable with weights_only
    state = {"torch": torch.get_rng_state(), "numpy": numpy, "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
