"""Open-file limits: every request in flight holds a socket, so the caps need that many descriptors.

With the default soft limit of 1,024 and 1,536 sockets needed, a client without this check gets sections back
empty from failed connects while the job reports itself finished. So at start we raise RLIMIT_NOFILE toward what
the caps need and, if the hard limit is too low, lower the caps to fit and say so; a request never fails for want
of a descriptor.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

RESERVED_FDS = 128  # journal, logs, metrics scrapes, the event loop, the embedded engine's pipes


@dataclass(frozen=True)
class FdPlan:
    caps: list[int]
    soft_limit: int
    warning: str | None


def raise_open_file_limit(wanted: int) -> int:
    """Raise the soft limit toward `wanted` (never above the hard limit); return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        soft = ceiling
    return soft


def fit_caps(caps: list[int], fd_limit: int, reserved: int = RESERVED_FDS) -> list[int]:
    """Scale caps down in proportion so that their sum plus the reserve fits the limit; each stays ≥ 1."""
    room = max(fd_limit - reserved, len(caps))
    total = sum(caps)
    if total <= room:
        return list(caps)
    scaled = [max(1, cap * room // total) for cap in caps]
    while sum(scaled) > room:  # rounding up to 1 can overshoot by a few; shave the largest
        scaled[scaled.index(max(scaled))] -= 1
    return scaled


def plan_open_files(caps: list[int], reserved: int = RESERVED_FDS) -> FdPlan:
    soft = raise_open_file_limit(sum(caps) + reserved)
    fitted = fit_caps(caps, soft, reserved)
    warning = None
    if fitted != caps:
        warning = (
            f"open-file limit {soft} is below the {sum(caps) + reserved} the caps need: "
            f"caps lowered from {caps} to {fitted} (raise the hard limit with `ulimit -Hn`)"
        )
    return FdPlan(fitted, soft, warning)
