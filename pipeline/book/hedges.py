"""Hedged requests for a book's late sections: a second copy of a section's first candidate, sent when the pool has
slots no request waits for and the first will end much later than a copy sent now (Hedges). The writer
(pipeline/book/write.py) asks Hedges when a section may send its copy and tells it what streamed and landed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import numpy as np

from pipeline.backends.pool import BackendPool
from pipeline.backends.sse import OnDelta

HEDGE_POLL_S = 0.1  # how often Hedges looks for spare slots and late sections
HEDGE_SEEN = 4  # first answers landed on a backend before its pace says what a copy sent there would take
HEDGE_RECENT = 16  # the last first answers of a backend its pace is the median of
HEDGE_MARGIN = 2.0  # a section is late when its remaining time at its own pace is this many copies' time
HEDGE_PIECES = 8  # pieces a candidate has streamed before its pace is read
HEDGE_RETRY_SHARE = 0.2  # past this share of first candidates needing a retry, every last section is hedged


@dataclass
class _Progress:
    """A waiting section's first candidate: when it was sent, its first piece came, and the pieces so far."""

    sent: float
    first_piece: float | None = None
    pieces: int = 0
    backend: str | None = None  # where its attempt under way went

    def pace(self, now: float) -> float | None:
        """Seconds a piece so far (None before HEDGE_PIECES pieces)."""
        if self.first_piece is None or self.pieces < HEDGE_PIECES:
            return None
        return (now - self.first_piece) / self.pieces


class Hedges:
    """Second copies for a book's late sections (Dean and Barroso, "The Tail at Scale", 2013: a hedged request).
    Whenever the pool has slots no request waits for, each section whose first candidate will, at its own pace so
    far, end more than HEDGE_MARGIN times later than a copy sent now would (`late`) is let send one more candidate,
    oldest first, as many as slots are spare (`run`, every HEDGE_POLL_S); the copy goes to the least-loaded backend.
    The writer keeps the first answer that passes and cancels the other copy (SectionWriter._first_answers). A copy
    is judged by the fastest backend: its recent first answers' median wait for a first piece, and its pace a piece
    now (of the first candidates streaming there; with too few, of its recent landed ones). On a fleet of equal
    engines every answer keeps its batch's pace and few are late; a backend slower than the rest makes its sections
    late. Where the model's first answers often need an off-point retry (more than HEDGE_RETRY_SHARE of them), every
    last section is let send its copy once the outline is complete and slots are spare: the retry it may need, sent
    beside its first answer instead of after it. Off by default (docs/measurements.md, "Hedged requests for late
    sections")."""

    def __init__(self, pool: BackendPool) -> None:
        self.pool = pool
        self.waiting: dict[str, anyio.Event] = {}  # section id -> set when its hedge may go, oldest first
        self.progress: dict[str, _Progress] = {}  # section id -> its first candidate's progress
        self.waits: dict[str, list[float]] = {}  # backend -> seconds its first candidates waited for a first piece
        self.paces: dict[str, list[float]] = {}  # backend -> seconds a piece of each of them
        self.pieces: list[int] = []  # the pieces (tokens, as engines stream them) of every landed first candidate
        self.retried: list[bool] = []  # whether each landed section's first candidates needed a retry
        self.writing = 0  # sections in SectionWriter.write
        self.complete = False  # no section is still to be handed over (the outline is complete)
        self.sent = 0
        self.kept = 0  # hedges whose answer landed and needed no retry

    def wait(self, section_id: str) -> anyio.Event:
        self.progress[section_id] = _Progress(sent=time.monotonic())
        return self.waiting.setdefault(section_id, anyio.Event())

    def heard(self, section_id: str, *, restarted: bool = False) -> None:
        """A piece of the section's first candidate streamed (`restarted`: it is asked again, from nothing)."""
        if (progress := self.progress.get(section_id)) is None:
            return
        if restarted:
            progress.first_piece, progress.pieces = None, 0
            return
        progress.first_piece = progress.first_piece or time.monotonic()
        progress.pieces += 1

    def counted(
        self,
        section_id: str,
        on_delta: OnDelta | None,
        on_retry: Callable[[], None] | None,
        on_sent: Callable[[str], None] | None,
    ) -> tuple[OnDelta, Callable[[], None], Callable[[str], None]]:
        """The first candidate's callbacks, each telling Hedges too (its pieces, a restart, its backend)."""

        def delta(text: str) -> None:
            self.heard(section_id)
            if on_delta is not None:
                on_delta(text)

        def retry() -> None:
            self.heard(section_id, restarted=True)
            if on_retry is not None:
                on_retry()

        def sent(backend: str) -> None:
            if (progress := self.progress.get(section_id)) is not None:
                progress.backend = backend
            if on_sent is not None:
                on_sent(backend)

        return delta, retry, sent

    def landed(self, section_id: str, *, backend: str | None, retry: bool = False) -> None:
        """The section's first answers are in; `backend`: where its first candidate landed (None: it did not);
        `retry`: they needed a retry."""
        self.waiting.pop(section_id, None)
        progress = self.progress.pop(section_id)
        if backend is not None:
            self.retried.append(retry)
        if backend is None or progress.first_piece is None or not progress.pieces:
            return
        now = time.monotonic()
        self.waits.setdefault(backend, []).append(progress.first_piece - progress.sent)
        self.paces.setdefault(backend, []).append((now - progress.first_piece) / progress.pieces)
        self.pieces.append(progress.pieces)

    def copy_seconds(self, length: float, now: float) -> float | None:
        """What a copy sent now would take on the fastest backend with HEDGE_SEEN first answers landed: its median
        wait for a first piece, and `length` pieces at its pace now (the median of the first candidates streaming
        there, HEDGE_SEEN of them at least; else of its recent landed ones)."""
        streaming: dict[str, list[float]] = {}
        for progress in self.progress.values():
            if progress.backend is not None and (pace := progress.pace(now)) is not None:
                streaming.setdefault(progress.backend, []).append(pace)
        copies = []
        for name, landed in self.paces.items():
            if len(landed) < HEDGE_SEEN:
                continue
            paces = streaming.get(name, [])
            pace = np.median(paces) if len(paces) >= HEDGE_SEEN else np.median(landed[-HEDGE_RECENT:])
            copies.append(float(np.median(self.waits[name][-HEDGE_RECENT:])) + length * float(pace))
        return min(copies, default=None)

    def late(self) -> list[str]:
        """The waiting sections, oldest first, whose first candidate needs more than HEDGE_MARGIN copies' time at
        its pace so far (with no piece yet: has waited that long), its length taken as the median landed. Once the
        outline is complete, where more than HEDGE_RETRY_SHARE of the first candidates landed (at least HEDGE_SEEN)
        needed a retry, every waiting section: its copy is the retry it may need, sent before its first answer."""
        if self.complete and len(self.retried) >= HEDGE_SEEN and np.mean(self.retried) > HEDGE_RETRY_SHARE:
            return list(self.waiting)
        if not self.pieces:
            return []
        length = float(np.median(self.pieces[-HEDGE_RECENT:]))
        now = time.monotonic()
        copy_s = self.copy_seconds(length, now)
        if copy_s is None:
            return []
        return [
            section_id
            for section_id in self.waiting
            if remaining(self.progress[section_id], length, now) > HEDGE_MARGIN * copy_s
        ]

    async def run(self) -> None:
        """Hand out hedges until the outline is complete and every section has landed."""
        while True:
            await anyio.sleep(HEDGE_POLL_S)
            if self.complete and not self.writing:
                return
            spare = self.pool.spare_slots()
            for section_id in self.late()[:spare] if spare else []:
                self.waiting.pop(section_id).set()
                self.sent += 1


def remaining(progress: _Progress, length: float, now: float) -> float:
    """Seconds the candidate still needs at its pace so far; with no piece yet, the time it has waited."""
    if progress.first_piece is None or progress.pieces == 0:
        return now - progress.sent
    pace = (now - progress.first_piece) / progress.pieces
    return pace * max(0.0, length - progress.pieces)
