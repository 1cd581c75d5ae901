"""Transport: the one interface through which the backend pool (pipeline/backends/pool/) sends an attempt.

Every chat client the pool can be given meets it: chat.chat (the default; it takes wire.stream_chat, the fast
path, or sdk.sdk_stream_chat, the openai SDK, as the backend names), ChatWorkers.chat (chatworkers.py: the
streams read in worker processes, `--workers N`) and RayChatWorkers.chat (raychat.py: read by Ray actors,
`--ray`). aiohttp_chat.stream_chat_aiohttp takes its session first and is one once that is bound.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from pipeline.backends.sse import OnDelta
from pipeline.records import Backend, ChatRequest, Completion


class Transport(Protocol):
    """Sends one streaming chat request to `backend` and returns its Completion.

    Contract: a failed attempt raises sse.AttemptError, whose outcome (records.Outcome) tells the pool whether
    to ask again at once, elsewhere or not at all; anything else it raises ends the request. `read_timeout`
    bounds every wait for bytes; `on_delta`, when given, hears the text as it streams. It holds no slot and
    retries nothing: the pool does both."""

    def __call__(
        self, backend: Backend, request: ChatRequest, read_timeout: float, on_delta: OnDelta | None = None
    ) -> Awaitable[Completion]: ...
