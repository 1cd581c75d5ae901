"""Warm, then fan out: the requests that share a prefix (a chapter's sections) go out one first, the rest once
the engine holds that first one's prompt, and to the same backend while it has a free slot.

Sent together, a chapter's sections each land on their own slot before any has computed the chapter's shared
part, and nothing is shared: llama.cpp's server keeps a prompt in the slot that computed it (a new request is
given the idle slot whose prompt it shares most, and the host-memory prompt cache saves a slot's prompt when
the slot is taken for another); vLLM's and SGLang's caches serve only blocks already computed. So the leader
goes first and its siblings wait for its sign, then prefer its backend (BackendPool.complete's `prefer`):

- `answer`: the leader's whole answer (its slot is free again and holds its prompt: what llama.cpp needs);
- `first-token`: the leader's first token (its prompt's blocks are computed: enough for vLLM and SGLang);
- `auto` (the default): as the leader's engine needs (pipeline/backends/engines.py `prefix_ready`);
- `off`: every section at once, wherever a slot is free.

A leader that fails gives the sign as well: its siblings are never held up by it. The measured choice of
default is in docs/measurements.md ("Warm, then fan out").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from pipeline.records import WarmSchedule


def first_token_everywhere(backend: str) -> WarmSchedule:
    return WarmSchedule.FIRST_TOKEN


@dataclass
class Leader:
    """The first request of a group sharing a prefix: the backend it went to, and the sign its siblings wait
    for (under `auto`, the one its backend's engine needs, known once it is sent)."""

    schedule: WarmSchedule
    ready_after: Callable[[str], WarmSchedule] = first_token_everywhere
    warm: anyio.Event = field(default_factory=anyio.Event)
    backend: str | None = None

    def sent(self, backend: str) -> None:
        self.backend = backend
        if self.schedule is WarmSchedule.AUTO:
            self.schedule = self.ready_after(backend)

    def first_token(self, text: str) -> None:
        """Told of each piece of the leader's answer as it streams: the first is the sign."""
        if self.schedule is WarmSchedule.FIRST_TOKEN and not self.warm.is_set():
            self.warm.set()

    def finished(self) -> None:
        """Answered or failed: nothing of the leader holds its siblings up any longer."""
        self.warm.set()


class PrefixGroups:
    """One leader a group (a chapter's id): the first request asked for it leads, the others follow."""

    def __init__(
        self, schedule: WarmSchedule, ready_after: Callable[[str], WarmSchedule] = first_token_everywhere
    ) -> None:
        self.schedule = schedule
        self.ready_after = ready_after  # a backend's name -> when its engine's prompts serve others
        self.leaders: dict[str, Leader] = {}

    def lead(self, group: str) -> Leader | None:
        """This group's leader, made now if the group has none (the caller then leads), else None."""
        if self.schedule is WarmSchedule.OFF or group in self.leaders:
            return None
        self.leaders[group] = leader = Leader(self.schedule, self.ready_after)
        return leader

    async def follow(self, group: str) -> str | None:
        """Wait for the group leader's sign; the backend its siblings should prefer (None: any)."""
        leader = self.leaders.get(group)
        if leader is None:
            return None
        await leader.warm.wait()
        return leader.backend
