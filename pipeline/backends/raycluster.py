"""Joining Ray for the client's workers (`--ray [ADDRESS]`): the cluster at ADDRESS (or RAY_ADDRESS), else a
local Ray instance started for the run. Used by bench/load/raypool.py (a bench's workers) and
backends/raychat.py (a book's streams). Ray is an optional extra (pip install 'fanout[ray]').

A HOST:PORT address is first probed with a plain TCP connect (PROBE_TIMEOUT_S): Ray's own `init` retries an
address that does not answer for minutes (measured here: more than 180 s), and a user deserves one line.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from pipeline.errors import UsageError

PROBE_TIMEOUT_S = 5.0
NOT_INSTALLED = "--ray: Ray is not installed (pip install 'fanout[ray]')"


def connect(address: str | None, workers: int) -> Any:
    """The `ray` module, joined to the cluster (or a local instance with at least `workers` CPUs)."""
    try:
        import ray
    except ImportError:
        raise UsageError(NOT_INSTALLED) from None
    if ray.is_initialized():
        return ray
    given = address or os.environ.get("RAY_ADDRESS")
    if given:
        check_reachable(given)
    try:
        if given:
            ray.init(address=address or None, log_to_driver=False)
        else:
            ray.init(num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"--ray {given or ''}: cannot join the cluster ({exc})") from None
    return ray


def check_reachable(address: str) -> None:
    """A HOST:PORT cluster address answers a TCP connect within PROBE_TIMEOUT_S; other forms ("auto") are
    left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc})") from None
