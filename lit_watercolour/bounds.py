"""Bounds on configuration values, checked when a config is built, each failure naming its option."""

from __future__ import annotations

from typing import Any, Literal, get_args


def require(ok: bool, option: str, rule: str, value: Any) -> None:
    """Raise, naming `option` as a config spells it, where `value` breaks `rule`."""
    if not ok:
        raise ValueError(f"{option} must be {rule}, not {value!r}")


def one_of(value: Any, choices: Any, option: str) -> None:
    """`value` must be one of a `Literal`'s choices (jsonargparse checks them; a config built in Python too)."""
    allowed = get_args(choices) if getattr(choices, "__origin__", None) is Literal else tuple(choices)
    require(value in allowed, option, "one of " + ", ".join(map(str, allowed)), value)
