"""Chat requests streamed by Ray actors (`fanout book --workers N --ray [ADDRESS]`): chatworkers.py's job,
the client's per-token work spread over N workers, with the workers on a Ray cluster (or a local instance).

Takes Backends and ChatRequests, as chat.chat does, and returns the same Completions or AttemptErrors; the
pool uses it as its transport and still enforces every cap. Each request goes to the live actor with the
fewest in flight. An actor streams the answer with the same client and yields, as a Ray streaming
generator, batches of text pieces (only for a caller that listens to them, every DELTA_BATCH_S) and then
the finished Completion or the attempt's failure. A caller that cancels cancels the actor's task too. An
actor or node that dies fails its requests with `client_worker_lost` (the pool asks them again on another)
and gets no more; when none is left the run ends with one line.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from pipeline.backends.chatworkers import DELTA_BATCH_S
from pipeline.backends.raycluster import connect
from pipeline.backends.sse import AttemptError, EveryChoice, OnDelta, deliver
from pipeline.errors import FanoutError
from pipeline.records import Backend, ChatRequest, Completion, Outcome

ACTOR_NAME = "fanout-chat-{run}-{index}"  # named (apart per run), so an operator can find and stop one


class ChatActor:
    """One worker on the cluster: streams answers with this package's own client."""

    async def chat(
        self,
        backend: Backend,
        request: ChatRequest,
        read_timeout: float,
        wants_deltas: bool,  # noqa: FBT001  (positional: Ray 2.60's argument check refuses keyword-only ones)
    ) -> Any:  # an async generator of messages, as a Ray streaming generator
        from pipeline.backends.chat import chat

        pieces: list[tuple[int, str]] = []  # (choice index, text)
        on_delta = EveryChoice(lambda index, text: pieces.append((index, text))) if wants_deltas else None
        task = asyncio.create_task(chat(backend, request, read_timeout, on_delta))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=DELTA_BATCH_S)
                if pieces:
                    yield ("deltas", pieces[:])
                    pieces.clear()
            completion = task.result()
        except AttemptError as failure:
            yield ("fail", failure.kind, failure.detail, failure.retry_after)
            return
        except Exception as exc:  # a bug, not an engine's failure: said, not retried
            yield ("fail", "client_error", f"{type(exc).__name__}: {exc}", None, False)
            return
        finally:
            task.cancel()
        yield ("done", completion)


class RayChatWorkers:
    def __init__(self, count: int, address: str | None = None):
        self.count = count
        self.address = address
        self.actors: list[Any] = []
        self.in_flight = [0] * count
        self.lost: set[int] = set()

    def start(self) -> RayChatWorkers:
        ray = connect(self.address, self.count)
        remote = ray.remote(num_cpus=1, scheduling_strategy="SPREAD", max_concurrency=10_000)(ChatActor)
        run = secrets.token_hex(4)
        self.actors = [remote.options(name=ACTOR_NAME.format(run=run, index=i)).remote() for i in range(self.count)]
        return self

    def stop(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        ray.shutdown()

    async def chat(
        self, backend: Backend, request: ChatRequest, read_timeout: float, on_delta: OnDelta | None = None
    ) -> Completion:
        import ray

        alive = [index for index in range(self.count) if index not in self.lost]
        if not alive:
            raise FanoutError("every client worker on the cluster was lost")
        worker = min(alive, key=self.in_flight.__getitem__)
        self.in_flight[worker] += 1
        stream = (
            self.actors[worker]
            .chat.options(num_returns="streaming")
            .remote(backend, request, read_timeout, on_delta is not None)
        )
        try:
            async for ref in stream:
                message = await ref
                if message[0] == "deltas" and on_delta is not None:
                    for index, text in message[1]:
                        deliver(on_delta, index, text)
                elif message[0] == "done":
                    return message[1]  # type: ignore[no-any-return]
                elif message[0] == "fail":
                    _, kind, detail, retry_after = message
                    raise AttemptError(kind, detail, retry_after)
            raise AttemptError(Outcome.CLIENT_WORKER_LOST, f"worker {worker} ended the answer without a result")
        except asyncio.CancelledError:
            ray.cancel(stream)
            raise
        except ray.exceptions.RayError as exc:  # the actor or its node died
            self.lost.add(worker)
            raise AttemptError(
                Outcome.CLIENT_WORKER_LOST, f"worker {worker} on the cluster: {type(exc).__name__}"
            ) from None
        finally:
            self.in_flight[worker] -= 1
