"""The environment a test gives a `fanout` subprocess: the user's, with every FANOUT_* setting dropped for
isolation except those that say where things are or how hard the engine may spin (FANOUT_CACHE: where the
built engine is; FANOUT_THREADS: llama-server's threads beside the suite), and FAKE planners judged by no
off-request judge (their titles are random words)."""

from __future__ import annotations

import os

KEPT = ("FANOUT_CACHE", "FANOUT_THREADS")


def isolated_env(**extra: str) -> dict[str, str]:
    """os.environ without FANOUT_* settings but KEPT, FANOUT_JUDGE=none, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANOUT_") or k in KEPT}
    return env | {"FANOUT_JUDGE": "none"} | extra
