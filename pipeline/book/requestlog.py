"""A book run's request log: every planning, section and repair request as it was sent, one JSON line each.

Takes what the pool reports of each finished request (the request, its completion or None, when it was
asked, its attempts); appends to requests.jsonl in the run folder. It is what `fanout bench --workload
RUN_DIR` replays: the messages, the cap, the sampling fields, and when the request was asked (seconds after
this job opened the log, and when it ended; a resumed run appends its own requests, timed from its own
start). The engine's token counts and the outcome are kept beside them so a replay can be checked against
the original, with what the engine said of its prefix cache (cached prompt tokens and where that figure
came from, llama.cpp's prefill time) and the ids to join a row with the engine's own log (the X-Request-Id
sent, the answer's id).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pipeline.records import Attempt, ChatRequest, Completion, Outcome
from pipeline.records.book import PromptCache

REQUEST_LOG = "requests.jsonl"


def request_kind(tag: str) -> str:
    """Planning tags start with 'plan:', a repair's new title with 'retitle'; sections are their ids."""
    if tag.startswith("plan"):
        return "plan"
    return "repair" if tag.startswith("retitle") else "section"


def outcome(completion: Completion | None, attempts: list[Attempt]) -> str:
    if completion is not None:
        return Outcome.OK
    if attempts and attempts[-1].kind is not Outcome.OK:
        return attempts[-1].outcome
    return Outcome.CANCELLED  # its caller stopped it (planning cancels an answer once it has enough titles)


class RequestLog:
    def __init__(self, folder: Path):
        self.path = folder / REQUEST_LOG
        self.started = time.monotonic()
        self.handle = self.path.open("a", encoding="utf-8")
        self.answered: list[Completion] = []

    def prompt_cache(self) -> PromptCache:
        """The prefix cache over this run's answered requests, as each answer told it."""
        told = [c for c in self.answered if c.cached_tokens is not None and c.prompt_tokens is not None]
        prompt = sum(c.prompt_tokens or 0 for c in told)
        cached = sum(c.cached_tokens or 0 for c in told)
        prefill = [c.prefill_ms for c in self.answered if c.prefill_ms is not None]
        return PromptCache(
            requests=len(self.answered),
            told=len(told),
            prompt_tokens=prompt,
            cached_tokens=cached,
            share=round(cached / prompt, 4) if prompt else None,
            prefill_seconds=round(sum(prefill) / 1000, 2) if prefill else None,
            sources=sorted({c.cached_source for c in told if c.cached_source}),
        )

    def record(
        self, request: ChatRequest, completion: Completion | None, t_asked: float, attempts: list[Attempt]
    ) -> None:
        row = {
            "tag": request.tag,
            "kind": request_kind(request.tag),
            "t_asked": round(t_asked - self.started, 4),
            "t_done": round(time.monotonic() - self.started, 4),  # answered, failed or cancelled
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "extra": {"temperature": request.temperature, **request.extra},
            "backend": completion.backend if completion else (attempts[-1].backend if attempts else None),
            "prompt_tokens": completion.prompt_tokens if completion else None,
            "completion_tokens": completion.completion_tokens if completion else None,
            "finish_reason": completion.finish_reason if completion else None,
            "cached_tokens": completion.cached_tokens if completion else None,
            "cached_source": completion.cached_source if completion else None,
            "prefill_ms": completion.prefill_ms if completion else None,
            "request_id": completion.request_id if completion else None,
            "response_id": completion.response_id if completion else None,
            "attempts": len(attempts),
            "outcome": outcome(completion, attempts),
        }
        if completion is not None:
            self.answered.append(completion)
        self.handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()
