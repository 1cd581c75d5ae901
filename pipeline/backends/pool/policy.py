"""RetryPolicy: the backend pool's tuning numbers, one frozen record its parts share.

retry.py reads `attempts` and the backoff, health.py `down_after`, `probe_after` and `give_up_after`, pool.py
passes `read_timeout` to the transport.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a failed request is asked again, how long an attempt may go without a byte, and
    when a backend is rested, probed again, and the whole fleet given up on."""

    attempts: int = 4  # a request gives up after this many failed attempts, once every backend had one
    backoff_initial: float = 0.5
    backoff_max: float = 10.0
    read_timeout: float = 120.0
    down_after: int = 3
    probe_after: float = 5.0
    give_up_after: float = 60.0  # every backend down and no answer for this long: the fleet cannot answer
