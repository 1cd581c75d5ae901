"""Chat requests streamed by worker processes (`fanout book --workers N`): the client's per-token work (HTTP,
SSE parsing) spread over N processes while the pool, its caps and every caller stay in this one.

Takes Backends and ChatRequests, as chat.chat does, and returns the same Completions or AttemptErrors; the
pool uses it as its transport. Each request goes to the worker with the fewest in flight, so each worker
holds an even share of every backend's cap; the pool still enforces the caps, so they hold exactly. A
worker streams the answer with the same client (fast path or SDK) and sends back the finished Completion;
text pieces travel back only for a caller that listens to them (the live page, the planner reading titles
line by line), batched every DELTA_BATCH_S per worker so this process pays one message per batch, not one
per token. A caller that cancels (the planner once it has its titles) cancels the worker's request too. A worker
whose process ends fails its requests with `client_worker_lost` (the pool asks them again) and gets no more.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from pipeline.backends.processes import Processes
from pipeline.backends.sdk import close_sdk_clients
from pipeline.backends.sse import AttemptError, EveryChoice, OnDelta, deliver
from pipeline.errors import FanoutError
from pipeline.records import Backend, ChatRequest, Completion, Outcome

DELTA_BATCH_S = 0.05


@dataclass
class Pending:
    future: asyncio.Future[Completion]
    on_delta: OnDelta | None
    context: contextvars.Context  # the caller's: its pieces are handed over as if read in its own task
    worker: int


class ChatWorkers:
    def __init__(self, count: int):
        self.count = count
        self.processes = Processes(count, worker_main, "client worker")
        self.connections: list[Connection] = []
        self.in_flight: list[int] = [0] * count
        self.pending: dict[int, Pending] = {}
        self.ids = itertools.count(1)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lost: set[int] = set()  # workers whose process has gone

    def __enter__(self) -> ChatWorkers:
        self.connections = self.processes.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.processes.stop()

    def _listen(self) -> None:
        """Once, from the event loop: a reader thread per worker hands its messages to the loop."""
        if self.loop is not None:
            return
        self.loop = asyncio.get_running_loop()
        for index, connection in enumerate(self.connections):
            threading.Thread(target=self._read, args=(index, connection), daemon=True).start()

    def _read(self, index: int, connection: Connection) -> None:
        assert self.loop is not None
        while True:
            try:
                message = connection.recv()
            except (EOFError, OSError):
                message = ("lost", index)
            try:
                self.loop.call_soon_threadsafe(self._dispatch, message)
            except RuntimeError:  # the loop has closed
                return
            if message[0] == "lost":
                return

    def _lose(self, index: int) -> None:
        """A worker's process has gone: its requests fail (the pool asks them again elsewhere), it gets no more."""
        self.lost.add(index)
        for entry in self.pending.values():
            if entry.worker == index and not entry.future.done():
                entry.future.set_exception(AttemptError(Outcome.CLIENT_WORKER_LOST, f"worker process {index} ended"))

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "lost":
            self._lose(message[1])
            return
        if kind == "deltas":
            for request_id, index, text in message[1]:
                entry = self.pending.get(request_id)
                if entry is not None and entry.on_delta is not None and not entry.future.done():
                    try:
                        entry.context.run(deliver, entry.on_delta, index, text)
                    except Exception as exc:  # the caller's own failure: it gets it back from its await
                        entry.future.set_exception(exc)
            return
        entry = self.pending.get(message[1])
        if entry is None or entry.future.done():
            return
        if kind == "done":
            entry.future.set_result(message[2])
        else:
            _, _, failure_kind, detail, retry_after = message
            entry.future.set_exception(AttemptError(failure_kind, detail, retry_after))

    async def chat(
        self, backend: Backend, request: ChatRequest, read_timeout: float, on_delta: OnDelta | None = None
    ) -> Completion:
        self._listen()
        alive = [index for index in range(self.count) if index not in self.lost]
        if not alive:
            raise FanoutError("every client worker process has ended")
        worker = min(alive, key=self.in_flight.__getitem__)
        request_id = next(self.ids)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = Pending(future, on_delta, contextvars.copy_context(), worker)
        self.in_flight[worker] += 1
        connection = self.connections[worker]
        try:
            try:
                connection.send(("chat", request_id, backend, request, read_timeout, on_delta is not None))
            except OSError as exc:  # the process ended before its reader thread could tell
                raise AttemptError(Outcome.CLIENT_WORKER_LOST, f"worker process {worker}: {exc}") from exc
            return await future
        except asyncio.CancelledError:
            if worker not in self.lost:
                connection.send(("cancel", request_id))
            raise
        finally:
            self.in_flight[worker] -= 1
            del self.pending[request_id]


# ---------------------------------------------------------------- in the worker process


def worker_main(connection: Connection) -> None:
    from pipeline.backends.loop import fast_loop

    connection.send("ready")
    with fast_loop():
        asyncio.run(serve(connection))


async def serve(connection: Connection) -> None:
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    threading.Thread(target=_receive, args=(connection, loop, inbox), daemon=True).start()
    tasks: dict[int, asyncio.Task[None]] = {}
    deltas: list[tuple[int, int, str]] = []
    flusher = asyncio.create_task(_flush_deltas(connection, deltas))
    while (message := await inbox.get()) is not None:
        if message[0] == "cancel":
            task = tasks.get(message[1])
            if task is not None:
                task.cancel()
            continue
        _, request_id, backend, request, read_timeout, wants_deltas = message
        task = asyncio.create_task(
            _one(connection, request_id, backend, request, read_timeout, wants_deltas=wants_deltas, deltas=deltas)
        )
        tasks[request_id] = task
        task.add_done_callback(forget(tasks, request_id))
    flusher.cancel()
    for task in list(tasks.values()):
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    await close_sdk_clients()


def forget(tasks: dict[int, asyncio.Task[None]], request_id: int) -> Callable[[asyncio.Task[None]], None]:
    def done(_: asyncio.Task[None]) -> None:
        tasks.pop(request_id, None)

    return done


def _receive(connection: Connection, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[Any]) -> None:
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            message = None
        loop.call_soon_threadsafe(inbox.put_nowait, message)
        if message is None:
            return


async def _one(
    connection: Connection,
    request_id: int,
    backend: Backend,
    request: ChatRequest,
    read_timeout: float,
    *,
    wants_deltas: bool,
    deltas: list[tuple[int, int, str]],
) -> None:
    from pipeline.backends.chat import chat

    on_delta = EveryChoice(lambda index, text: deltas.append((request_id, index, text))) if wants_deltas else None
    try:
        completion = await chat(backend, request, read_timeout, on_delta)
    except AttemptError as failure:
        connection.send(("fail", request_id, failure.kind, failure.detail, failure.retry_after))
        return
    except asyncio.CancelledError:
        return
    except Exception as exc:  # a bug, not an engine's failure: said, not retried
        connection.send(("fail", request_id, "client_error", f"{type(exc).__name__}: {exc}", None, False))
        return
    if deltas:
        _send_deltas(connection, deltas)  # every piece before its answer's end
    connection.send(("done", request_id, completion))


async def _flush_deltas(connection: Connection, deltas: list[tuple[int, int, str]]) -> None:
    while True:
        await asyncio.sleep(DELTA_BATCH_S)
        if deltas:
            _send_deltas(connection, deltas)


def _send_deltas(connection: Connection, deltas: list[tuple[int, int, str]]) -> None:
    batch = list(deltas)
    deltas.clear()
    connection.send(("deltas", batch))
