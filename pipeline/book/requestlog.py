"""A book run's request log: every planning, section and repair request as it was sent, one JSON line each.

Takes what the pool reports of each finished request (the request, its completion or None, when it was
asked, its attempts); appends to requests.jsonl in the run folder. It is what `fanout bench --workload
RUN_DIR` replays: the messages, the cap, the sampling fields, and when the request was asked (seconds after
this job opened the log, and when it ended; a resumed run appends its own requests, timed from its own
start). The engine's token counts and the outcome are kept beside them so a replay can be checked against
the original, with what the engine said of its prefix cache (cached prompt tokens and where that figure
came from, llama.cpp's prefill time), the ids to join a row with the engine's own log (the X-Request-Id
sent, the answer's id), and the answer's text as the engine sent it (what `fanout identity --book` compares
with the same request asked alone).

A section request's source passages are kept once a run, in passages.jsonl (pipeline/journal.py's PassageFile): in
the row, each passage's text in the messages is a reference (NUL, its number, NUL) and "passages" lists the numbers;
`read_rows` puts the texts back, so a replay sends the prompt as it was sent.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from pipeline.cpu import Stage, charged
from pipeline.files import naming
from pipeline.journal import PASSAGES_FILE, cut_torn_tail, passage_file, read_passages
from pipeline.records import Attempt, ChatRequest, Completion, Outcome
from pipeline.records.book import PromptCache
from pipeline.records.sources import Passage

REQUEST_LOG = "requests.jsonl"
REFERENCE = re.compile("\x00(\\d+)\x00")


def referenced(messages: list[dict[str, str]], passages: list[Passage]) -> list[dict[str, str]]:
    """The messages with each passage's text named by its number (a message that holds a NUL already is kept
    whole: its references could not be told from its text)."""
    if not passages:
        return messages
    out = []
    for message in messages:
        content = message.get("content", "")
        if "\x00" not in content:
            for passage in (passage for passage in passages if passage.text):
                content = content.replace(passage.text, f"\x00{passage.number}\x00")
        out.append({**message, "content": content})
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    """requests.jsonl's rows, each passage's text put back in its messages (from passages.jsonl beside it). Raises
    ValueError (a line that is not JSON) and KeyError (a passage passages.jsonl does not hold)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if any(row.get("passages") for row in rows):
        passages = read_passages(path.parent / PASSAGES_FILE)
        for row in rows:
            if row.get("passages"):
                row["messages"] = [restored(message, passages) for message in row["messages"]]
    return rows


def restored(message: dict[str, str], passages: dict[int, Passage]) -> dict[str, str]:
    content = REFERENCE.sub(lambda found: passages[int(found.group(1))].text, message.get("content", ""))
    return {**message, "content": content}


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
        self.passages = passage_file(folder)
        self.started = time.monotonic()
        cut_torn_tail(self.path)  # a line a kill or a full disk cut short: a resume appends after whole lines
        self.handle = self.path.open("a", encoding="utf-8")
        self.answered = 0
        self.told = 0  # answers whose engine said how many prompt tokens came from its cache
        self.told_prompt_tokens = 0
        self.cached_tokens = 0
        self.prefill_ms: float | None = None
        self.cache_sources: set[str] = set()

    def prompt_cache(self) -> PromptCache:
        """The prefix cache over this run's answered requests, as each answer told it."""
        prompt = self.told_prompt_tokens
        return PromptCache(
            requests=self.answered,
            told=self.told,
            prompt_tokens=prompt,
            cached_tokens=self.cached_tokens,
            share=round(self.cached_tokens / prompt, 4) if prompt else None,
            prefill_seconds=None if self.prefill_ms is None else round(self.prefill_ms / 1000, 2),
            sources=sorted(self.cache_sources),
        )

    def _count_cache(self, completion: Completion) -> None:
        self.answered += 1
        if completion.prefill_ms is not None:
            self.prefill_ms = (self.prefill_ms or 0.0) + completion.prefill_ms
        if completion.cached_tokens is not None and completion.prompt_tokens is not None:
            self.told += 1
            self.told_prompt_tokens += completion.prompt_tokens
            self.cached_tokens += completion.cached_tokens
            self.cache_sources |= {completion.cached_source} if completion.cached_source else set()

    @charged(Stage.JOURNALING)
    def record(
        self, request: ChatRequest, completion: Completion | None, t_asked: float, attempts: list[Attempt]
    ) -> None:
        row = {
            "tag": request.tag,
            "kind": request_kind(request.tag),
            "t_asked": round(t_asked - self.started, 4),
            "t_done": round(time.monotonic() - self.started, 4),  # answered, failed or cancelled
            "messages": referenced(request.messages, request.passages),
            "max_tokens": request.max_tokens,
            "choices": request.choices,  # samples of the one prompt (`n`): a replay asks as many
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
            "text": completion.text if completion else None,
        }
        if request.passages:
            row["passages"] = self.passages.keep(request.passages)  # on disk before the row that names them
        if completion is not None:
            self._count_cache(completion)
        with naming(self.path):
            self.handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            self.handle.flush()

    def close(self) -> None:
        with naming(self.path):
            self.handle.close()
