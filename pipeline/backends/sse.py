"""Streaming chat completions, the protocol: the lean SSE reader, its failure kinds, and the Completion.

Takes a Backend and a ChatRequest's events; `SseStream` reads only what is needed from each event (content
deltas, finish_reason and usage, per choice where the request asked for several), `completion_of` turns a
finished stream into a Completion (text, finish_reason, usage, timestamps, the other choices' texts) or
raises an AttemptError saying what went wrong and whether it is worth asking again. The transports feed it:
wire.py (the hot path, an asyncio Protocol), aiohttp_chat.py (the client-ceiling bench's yardstick) and
sdk.py (the openai SDK). What they send and check around the body (the request's JSON and headers, the
answer's status and content type) is envelope.py's. Retries and balancing live in pool/ (retry.py,
admission.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from pipeline.records import Backend, ChatRequest, Completion, Endpoint, Outcome

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # model output is untrusted: a runaway answer is cut and flagged
MAX_LINE_BYTES = 128 * 1024  # one SSE line (aiohttp's own line limit was the same): longer is `oversized`


class AttemptError(Exception):
    """One failed attempt. `kind` names the failure; `retry_after` is the server's hint in seconds. Whose
    fault it was, and so where it is asked again, is records.Outcome's rule."""

    def __init__(self, kind: str, detail: str = "", retry_after: float | None = None):
        kind = str(kind)  # an Outcome's recorded name
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after

    @property
    def outcome(self) -> Outcome:
        return Outcome.of(self.kind)

    @property
    def blames_request(self) -> bool:
        return Outcome.blames_request(self.kind)


_CONTENT_KEYS = {Endpoint.CHAT: b'"content":"', Endpoint.COMPLETIONS: b'"text":"'}  # where an event's text is
_UNIQUE_KEYS = {  # each once in a template event: a repeated key could make a later event mean something else
    Endpoint.CHAT: (b'"content"', b'"choices"', b'"delta"'),
    Endpoint.COMPLETIONS: (b'"text"', b'"choices"'),
}
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')  # a JSON string body with nothing to unescape


class SseStream:
    """Accumulates one SSE stream. Each `data:` line is a JSON chunk; only these fields matter: error, model,
    usage, and per choice its text (delta.content from chat completions, text from text completions),
    logprobs, finish_reason.

    Choices: an answer to a request for n > 1 (the OpenAI `n`) carries each choice's events under its own
    `index`, interleaved, the first not always index 0's. Choice 0 (index 0, or none) is read as an answer
    of one choice is: `parts`, `finish_reason`, `logprobs`, `token_times`, the fast path and `on_delta` are
    its alone. The other choices' text and finish_reason go to `more_parts` and `more_finish_reasons` by
    index, through the slow path: the template is learned only from a choice-0 event, so an event of another
    index (its head or tail holds that index) never matches it; an `on_delta` that is an EveryChoice hears
    them too. `t_first` and `size` count every choice.

    Fast path: the first plain content event of choice 0 is parsed by json.loads and remembered as a
    template, its bytes split around the content string (head, tail). A later event that is the same head,
    a string with no quote, backslash or control character, and the same tail is that same event with other
    text, so its content is the UTF-8 decoding of the middle, without json.loads. Anything else (escapes,
    usage, finish_reason, logprobs, a new `created` second) goes through json.loads and may become the new
    template.

    `feed_bytes` takes the body as it arrives and owns the SSE framing (lines, `data:` fields, [DONE]). Template
    events as engines write them (`data: `, the event, a blank line) at the start of a read with nothing left
    over from the read before are matched whole, without splitting lines: against an engine almost every read
    is one such event, and a client that falls behind reads several at once."""

    __slots__ = (
        "parts", "size", "finish_reason", "usage", "model", "t_first", "token_times", "on_delta", "logprobs",
        "response_id", "timings", "other_events", "endpoint", "more_parts", "more_finish_reasons",
        "_head", "_tail", "_fixed", "_read_head", "_read_tail", "_read_head_len", "_read_tail_len", "_pending",
    )  # fmt: skip

    def __init__(self, *, keep_token_times: bool, on_delta: OnDelta | None = None, endpoint: Endpoint = Endpoint.CHAT):
        self.endpoint = endpoint
        self.parts: list[str] = []  # the content of each content event of choice 0, in order
        self.size = 0  # bytes of content so far, of every choice (one bound for the whole answer)
        self.more_parts: dict[int, list[str]] = {}  # index -> the content events of that choice (index > 0)
        self.more_finish_reasons: dict[int, str] = {}  # index -> its finish_reason (index > 0)
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.t_first: float | None = None  # the first content of any choice (all share one prefill)
        self.token_times: list[float] | None = [] if keep_token_times else None
        self.on_delta = on_delta
        self.logprobs: list[dict[str, Any]] = []
        self.response_id: str | None = None
        self.timings: dict[str, Any] | None = None  # llama.cpp's per-request timings (prompt_ms, cache_n, ...)
        self.other_events = 0  # data events read by the slow path (role, finish, usage, ...): progress too
        self._head = b""
        self._tail = b""
        self._fixed = 0  # len(head) + len(tail); 0: no template yet
        self._read_head = b""  # the template as one whole read: b"data: " + head, tail + b"\n\n"
        self._read_tail = b""
        self._read_head_len = 0  # 0: no template yet
        self._read_tail_len = 0
        self._pending = b""  # what the last read left after its last newline

    @property
    def chunks(self) -> int:
        """Content events so far."""
        return len(self.parts)

    @property
    def events(self) -> int:
        """Data events so far: what shows a stream is moving (comment lines and blank keep-alives do not)."""
        return len(self.parts) + self.other_events

    def feed_bytes(self, data: bytes) -> bool:
        """Feed SSE body bytes as they arrived; True once [DONE] came (nothing after it is read). A read of
        exactly one template event is taken before the general search of _take_whole_events, which costs
        a quarter more a read (examples/client_cost.py)."""
        head_len = self._read_head_len
        if head_len and not self._pending and data.startswith(self._read_head):
            if data.endswith(self._read_tail) and len(data) >= head_len + self._read_tail_len:
                middle = data[head_len : len(data) - self._read_tail_len]  # one event, or several (then not plain)
                if _PLAIN.fullmatch(middle):
                    try:
                        content = middle.decode()
                    except UnicodeDecodeError:
                        pass  # the line path decides
                    else:
                        if content:
                            self._take_content(content, len(middle))
                        return False
            taken = self._take_whole_events(data)
            if taken == len(data):
                return False
            data = data[taken:]
        return self._feed_lines(data)

    def _take_whole_events(self, data: bytes) -> int:
        """Content events at the start of `data` that are whole template events, taken; the bytes used.
        The tail begins with a quote and a plain middle holds none, so the first tail after a head ends
        the event if it is a template event at all; if it is not, the middle is not plain and this stops."""
        head, tail = self._read_head, self._read_tail
        head_len, tail_len = self._read_head_len, self._read_tail_len
        at = 0
        while data.startswith(head, at):
            end = data.find(tail, at + head_len)
            if end < 0:
                break
            middle = data[at + head_len : end]
            if not _PLAIN.fullmatch(middle):
                break
            try:
                content = middle.decode()
            except UnicodeDecodeError:
                break  # the line path decides
            if content:
                self._take_content(content, len(middle))
            at = end + tail_len
        return at

    def _feed_lines(self, data: bytes) -> bool:
        """Each `data:` line to `feed` until [DONE]; blank separators, comments and event names are skipped."""
        if self._pending:
            data = self._pending + data
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if data.startswith(b"data:", start):
                payload = data[start + 5 : end].strip()
                if payload == b"[DONE]":
                    self._pending = b""
                    return True
                self.feed(payload)
            start = end + 1
        self._pending = data[start:]
        if len(self._pending) > MAX_LINE_BYTES:
            raise AttemptError(Outcome.OVERSIZED, "SSE line too long")
        return False

    def feed(self, payload: bytes) -> None:
        fixed = self._fixed
        if fixed and len(payload) >= fixed and payload.startswith(self._head) and payload.endswith(self._tail):
            middle = payload[len(self._head) : len(payload) - len(self._tail)]
            if _PLAIN.fullmatch(middle):
                try:
                    content = middle.decode()
                except UnicodeDecodeError:
                    pass  # json.loads decides (it passes surrogates through; completion_of flags them)
                else:
                    if content:
                        self._take_content(content, len(middle))
                    return
        self._feed_json(payload)

    def _feed_json(self, payload: bytes) -> None:
        """The slow path: any event the template does not fit, parsed whole."""
        self.other_events += 1
        try:
            event = json.loads(payload)
        except ValueError as exc:
            raise AttemptError(Outcome.BAD_EVENT, f"undecodable SSE data: {payload[:80]!r}") from exc
        if not isinstance(event, dict):
            raise AttemptError(Outcome.BAD_EVENT, "SSE data is not an object")
        if "error" in event:
            raise AttemptError(Outcome.STREAM_ERROR, str(event["error"])[:200])
        self._take_about(event)
        choices: list[Any] = event.get("choices") or []
        try:
            for choice in choices:
                self._take_choice(choice)
        except (AttributeError, TypeError) as exc:  # a choice, delta or logprobs of another shape
            raise AttemptError(Outcome.BAD_EVENT, f"unexpected event shape: {exc}"[:200]) from exc
        if len(choices) == 1 and not event.get("usage"):
            self._learn(payload, choices[0])

    def _take_about(self, event: dict[str, Any]) -> None:
        """What an event says about the answer as a whole: model, id, usage, llama.cpp's timings."""
        if self.model is None and isinstance(event.get("model"), str):
            self.model = event["model"]
        if self.response_id is None and isinstance(event.get("id"), str):
            self.response_id = event["id"][:200]
        if isinstance(event.get("timings"), dict):
            self.timings = event["timings"]
        if event.get("usage"):
            if not isinstance(event["usage"], dict):
                raise AttemptError(Outcome.BAD_EVENT, "usage is not an object")
            self.usage = event["usage"]

    def _learn(self, payload: bytes, choice: Any) -> None:
        """Remember this event as the template if it is a plain content event of choice 0 that can be split
        safely."""
        if not isinstance(choice, dict) or choice.get("logprobs") or choice.get("finish_reason"):
            return
        if choice_index(choice):  # another choice's: its events would be taken as choice 0's
            return
        content = self._text_of(choice)
        if not isinstance(content, str) or not content:
            return
        key = _CONTENT_KEYS[self.endpoint]
        at = payload.find(key)
        if at < 0 or any(payload.count(unique) != 1 for unique in _UNIQUE_KEYS[self.endpoint]):
            return
        start = at + len(key)
        end = payload.find(b'"', start)
        middle = payload[start:end]
        if end < 0 or not _PLAIN.fullmatch(middle) or middle.decode("utf-8", "replace") != content:
            return
        self._head, self._tail = payload[:start], payload[end:]
        self._fixed = len(self._head) + len(self._tail)
        # `data: ` + head + middle + tail + a blank line splits into this one line (head and tail hold no
        # newline, a plain middle none; strip() leaves them whole) and an empty one: the same event
        self._read_head, self._read_tail = b"data: " + self._head, self._tail + b"\n\n"
        self._read_head_len, self._read_tail_len = len(self._read_head), len(self._read_tail)

    def _take_content(self, content: str, size: int) -> None:
        """One content event's text, `size` bytes of UTF-8."""
        if self.t_first is None:
            self.t_first = time.monotonic()
        self.parts.append(content)
        self.size += size
        if self.token_times is not None:
            self.token_times.append(time.monotonic())
        if self.on_delta is not None:
            self.on_delta(content)
        if self.size > MAX_ANSWER_BYTES:
            raise AttemptError(Outcome.OVERSIZED, f"answer passed {MAX_ANSWER_BYTES} bytes")

    def _text_of(self, choice: dict[str, Any]) -> Any:
        if self.endpoint is Endpoint.COMPLETIONS:
            return choice.get("text")
        return (choice.get("delta") or {}).get("content")

    def _checked_text(self, choice: dict[str, Any]) -> str | None:
        content = self._text_of(choice)
        if content and not isinstance(content, str):
            raise AttemptError(Outcome.BAD_EVENT, f"the answer's text is a {type(content).__name__}, not text")
        return content or None

    def _take_choice(self, choice: dict[str, Any]) -> None:
        index = choice_index(choice)
        if index:
            self._take_other_choice(index, choice)
            return
        content = self._checked_text(choice)
        if content:
            self._take_content(content, len(content.encode("utf-8", "surrogatepass")))
        if choice.get("logprobs"):
            self.logprobs.extend(per_token_logprobs(choice["logprobs"]))
        if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
            self.finish_reason = choice["finish_reason"][:40]

    def _take_other_choice(self, index: int, choice: dict[str, Any]) -> None:
        """Text and finish_reason of choice `index` > 0; its logprobs are not kept."""
        content = self._checked_text(choice)
        if content:
            if self.t_first is None:
                self.t_first = time.monotonic()
            self.more_parts.setdefault(index, []).append(content)
            self.size += len(content.encode("utf-8", "surrogatepass"))
            if self.on_delta is not None:
                deliver(self.on_delta, index, content)
            if self.size > MAX_ANSWER_BYTES:
                raise AttemptError(Outcome.OVERSIZED, f"answers passed {MAX_ANSWER_BYTES} bytes")
        if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
            self.more_finish_reasons[index] = choice["finish_reason"][:40]

    def more_texts(self, choices: int) -> list[str]:
        """The texts of choices 1..choices-1, in index order ("" for one that sent no text)."""
        return ["".join(self.more_parts.get(index, ())) for index in range(1, choices)]


def choice_index(choice: dict[str, Any]) -> int:
    """A choice's `index`: 0 when it has none (an answer of one choice need not say)."""
    index = choice.get("index")
    if index is None:
        return 0
    if type(index) is not int or index < 0:
        raise AttemptError(Outcome.BAD_EVENT, f"a choice's index is {str(index)[:40]!r}, not a count")
    return index


def per_token_logprobs(logprobs: dict[str, Any]) -> list[dict[str, Any]]:
    """Logprobs as chat completions give them, one dict a token (token, logprob, top_logprobs as a list, an id
    where the engine adds one). Text completions in the legacy shape (parallel lists `tokens`,
    `token_logprobs` and `top_logprobs` as token -> logprob maps) are turned into it; llama.cpp answers both
    endpoints in the chat shape."""
    if "content" in logprobs or "tokens" not in logprobs:
        return list(logprobs.get("content") or ())
    tokens, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    return [
        {
            "token": token,
            "logprob": value,
            "top_logprobs": [{"token": k, "logprob": v} for k, v in (top or {}).items()],
        }
        for token, value, top in zip(tokens, values, tops)
    ]


OnDelta = Callable[[str], None]  # the text of choice 0 as it streams


class EveryChoice:
    """An on_delta that hears every choice of an answer to a request for n > 1, each piece with its choice's
    index (a planner choosing from its samples' lines as they stream, pipeline/book/plan/asking.py). Called as a
    plain OnDelta it hears choice 0."""

    __slots__ = ("each",)

    def __init__(self, each: Callable[[int, str], None]) -> None:
        self.each = each

    def __call__(self, text: str) -> None:
        self.each(0, text)


def deliver(on_delta: OnDelta, index: int, text: str) -> None:
    """A piece of choice `index` to `on_delta`: choice 0's to any, another's only to one that hears every choice."""
    if index == 0:
        on_delta(text)
    elif isinstance(on_delta, EveryChoice):
        on_delta.each(index, text)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cached_prompt(usage: dict[str, Any], timings: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """Prompt tokens served from the engine's cache, and where the figure came from: the OpenAI usage field
    (vLLM with --enable-prompt-tokens-details, SGLang, llama.cpp) or llama.cpp's own timings.cache_n."""
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is not None:
        return cached, "usage.prompt_tokens_details.cached_tokens"
    cached = _count((timings or {}).get("cache_n"))
    return (cached, "timings.cache_n") if cached is not None else (None, None)


def prefill_ms(timings: dict[str, Any] | None) -> float | None:
    value = (timings or {}).get("prompt_ms")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def other_choices(request: ChatRequest, stream: SseStream) -> list[str]:
    """The texts of choices 1..N-1 of a request for N; an index past N-1 is a bad event."""
    index = max((*stream.more_parts, *stream.more_finish_reasons), default=0)
    if index >= request.choices:
        raise AttemptError(Outcome.BAD_EVENT, f"a choice of index {index} in an answer of {request.choices} asked")
    return stream.more_texts(request.choices)


def completion_of(
    backend: Backend, request: ChatRequest, stream: SseStream, t_sent: float, request_id: str | None = None
) -> Completion:
    """The Completion of a finished stream. EMPTY only when every choice is: `text` is choice 0's even so."""
    text = "".join(stream.parts)
    more = other_choices(request, stream)
    usage = stream.usage or {}
    cached, cached_source = cached_prompt(usage, stream.timings)
    if not text.strip() and not any(other.strip() for other in more):
        raise AttemptError(Outcome.EMPTY, f"finish_reason={stream.finish_reason}")
    try:
        for answer in (text, *more):
            answer.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AttemptError(Outcome.BAD_UTF8, str(exc)) from exc
    return Completion(
        tag=request.tag,
        backend=backend.name,
        model=stream.model,
        text=text,
        finish_reason=stream.finish_reason,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        t_sent=t_sent,
        t_first_token=stream.t_first,
        t_done=time.monotonic(),
        chunks=stream.chunks,
        token_times=stream.token_times or [],
        logprobs=stream.logprobs or None,
        cached_tokens=cached,
        cached_source=cached_source,
        prefill_ms=prefill_ms(stream.timings),
        request_id=request_id,
        response_id=stream.response_id,
        more_texts=more,
        more_finish_reasons=[stream.more_finish_reasons.get(index) for index in range(1, request.choices)],
    )
