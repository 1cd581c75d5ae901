"""The records the backend pool's parts share: one backend's (BackendState) and one request's (Tries).

admission.py moves `in_flight` and reads the caps, health.py keeps the failure counters and rests, retry.py
reads where a request failed; pool.py counts what was sent and reports it (BackendSnapshot).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from pipeline.records import Attempt, Backend


@dataclass
class BackendState:
    """One backend in the pool: its slots in use, its counters, and what health.py knows of it."""

    backend: Backend
    cap: int
    in_flight: int = 0
    peak_in_flight: int = 0
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    reissued: int = 0
    consecutive_failures: int = 0
    down_until: float = 0.0
    held: bool = False  # out of use until revived (its engine is being restarted)
    last_failure: str = ""  # the last failed attempt's outcome and detail, for the fleet's last word

    @property
    def load(self) -> float:
        return self.in_flight / self.cap


class BackendSnapshot(TypedDict):
    """One backend's counters, as BackendPool.snapshot reports them."""

    name: str
    cap: int
    in_flight: int
    peak_in_flight: int
    sent: int
    succeeded: int
    failed: int
    reissued: int
    down: bool


@dataclass
class Tries:
    """One request's attempts so far, and which backends it must not or had better not be asked of."""

    attempts: list[Attempt] = field(default_factory=list)
    failures: int = 0  # attempts that failed (a run of cuts before the first byte counts once)
    failed_on: set[str] = field(default_factory=set)  # backends that failed it: others are asked first
    refused_by: set[str] = field(default_factory=set)  # backends that blamed the request: never asked again
    prefer: str | None = None  # the backend to take when it has a free slot (it holds the request's prefix)
    on_sent: Callable[[str], None] | None = None  # told the backend of each attempt
    slots: int = 1  # slots it would hold: one a choice (an engine gives each sample a slot)
    granted: int = 1  # slots its current attempt holds: as many of `slots` as were free, at least one

    def count_failure(self, backend: str, *, blames_request: bool) -> None:
        """One failed attempt on `backend`: held against the request if it blamed the request, else against
        the backend."""
        self.failures += 1
        if blames_request:
            self.refused_by.add(backend)
        else:
            self.failed_on.add(backend)
