"""One bench request: sent straight to its backend (not through the pool, which would queue), asked again at
once when the server closed the connection before the first byte (llama-server drops idle keep-alives),
and turned into a RequestSample with the client's send, first-token and per-event times."""

from __future__ import annotations

import hashlib
import json
import time

from pipeline.backends.chat import chat
from pipeline.backends.sse import AttemptError, OnDelta
from pipeline.bench.load.runner import Target
from pipeline.records import ChatRequest, Completion, Outcome
from pipeline.records.bench import RequestSample

REASK_BEFORE_FIRST_BYTE = 5
START_DELAY_S = 0.2  # a level's t0 lies this far ahead, so every stream and sampler starts on it


def sample_of(
    target: Target, number: int, t_sent: float, completion: Completion, reissued: int, *, keep_answer: bool = False
) -> RequestSample:
    return RequestSample(
        backend=target.backend.name,
        number=number,
        t_sent=t_sent,
        t_first=completion.t_first_token,
        t_done=completion.t_done,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        chunks=completion.chunks,
        finish_reason=completion.finish_reason,
        reissued=reissued,
        cached_tokens=completion.cached_tokens,
        prefill_ms=completion.prefill_ms,
        request_id=completion.request_id,
        response_id=completion.response_id,
        token_times=completion.token_times,
        answer=completion.text if keep_answer else None,
    )


def prompt_key(request: ChatRequest) -> str:
    """A short digest of the messages: equal for the same prompt (and history), apart otherwise."""
    return hashlib.blake2b(json.dumps(request.messages, sort_keys=True).encode(), digest_size=8).hexdigest()


def failed_sample(target: Target, number: int, t_sent: float, reissued: int, error: str) -> RequestSample:
    return RequestSample(
        backend=target.backend.name,
        number=number,
        t_sent=t_sent,
        t_done=time.monotonic(),
        reissued=reissued,
        error=error,
    )


async def send_request(
    target: Target,
    request: ChatRequest,
    number: int,
    read_timeout: float,
    on_delta: OnDelta | None = None,
    *,
    keep_answer: bool = False,
) -> RequestSample:
    """One request, asked again at once when the server closed the connection before the first byte;
    `keep_answer` keeps the answer's text in the sample (a conversation's next turn resends it, the answer
    audit reads it) with a key naming its prompt."""
    t_sent = time.monotonic()
    error = str(Outcome.CUT_BEFORE_FIRST_BYTE)
    for reissued in range(REASK_BEFORE_FIRST_BYTE):
        try:
            completion = await chat(target.backend, request, read_timeout, on_delta)
        except AttemptError as failure:
            error = f"{failure.kind}: {failure.detail}"[:300]
            if failure.outcome.asked_again_at_once:
                continue
            return failed_sample(target, number, t_sent, reissued, error)
        sample = sample_of(target, number, t_sent, completion, reissued, keep_answer=keep_answer)
        if keep_answer:
            sample.prompt_key = prompt_key(request)
        return sample
    return failed_sample(target, number, t_sent, REASK_BEFORE_FIRST_BYTE, error)
