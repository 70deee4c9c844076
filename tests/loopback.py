"""The loopback HTTP server lives in the package (the rehearsal script serves its judge with it)."""

from lit_watercolour.offline.loopback import LoopbackServer

__all__ = ["LoopbackServer"]
