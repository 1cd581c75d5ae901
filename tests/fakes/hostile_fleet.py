"""A FAKE hostile backend: an OpenAI-compatible server that, per request and from a seed, draws one fault of
every kind the client tells apart, and otherwise answers as a well-behaved model would (planning lists and
prose, from BookReplies).

It speaks raw HTTP/1.1 on an asyncio server, so it can answer what no web framework would send: a garbage
status line, headers and then nothing, a reset mid-stream. FAULTS maps each fault to the attempt outcome the
client records for it (pipeline/records Outcome); together they cover every outcome a server can cause but
`connect` (a refused connection is a server that is down: the tests kill one for that). `share` is the
chance a request gets a fault, `faults` the kinds drawn from (default: all), and with `models_too` the
server answers /v1/models with its faults as well (an HTML error page for everything).

Run alone: `python -m tests.fakes.hostile_fleet --seed 3 --share 0.3 [--faults a,b] [--port N]` prints its
URL; GET /fake/stats gives its counters and the fault each request drew.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

from tests.fakes.fake_engine import MODEL, BookReplies, prompt_of, serve_until_stopped
from tests.fakes.fake_prompts import section_title

HUGE_BYTES = 4 * 1024 * 1024 + 64 * 1024  # just past the client's MAX_ANSWER_BYTES
HUGE_PIECE = 32 * 1024
HUGE_LINE = 1024 * 1024  # one data: line of 1 MB, past the client's MAX_LINE_BYTES
DRIP_S = 0.1  # a keep-alive comment this often, never an event

FAULTS = {
    "http_500": "http_500",
    "http_503": "http_503",  # with a Retry-After
    "http_429": "http_429",
    "http_400": "http_400",  # names the request: that backend is not asked it again, the others are
    "html_502": "http_502",  # a proxy's HTML error page
    "html_200": "not_event_stream",  # an HTML page with 200 where a stream should be
    "json_200": "not_event_stream",  # a whole JSON answer instead of a stream
    "garbage_status": "bad_response",
    "close_early": "cut_before_first_byte",
    "headers_then_silence": "timeout",
    "stall": "timeout",
    "slow_drip": "timeout",  # keep-alive comments, never an event
    "reset_mid_stream": "stream_cut",
    "no_done": "stream_cut",  # every event, then the end of the body without [DONE]
    "error_event": "stream_error",
    "bad_json": "bad_event",
    "wrong_shape": "bad_event",  # valid JSON, not a chunk's shape
    "bad_bytes": "bad_event",  # a data line that is not UTF-8
    "lone_surrogate": "bad_utf8",  # valid JSON whose text cannot be UTF-8
    "empty": "empty",
    "huge_answer": "oversized",
    "huge_line": "oversized",
}
HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(payload: dict) -> bytes:
    return b"data: " + json.dumps({"id": "h", "object": "chat.completion.chunk", "model": MODEL, **payload}).encode()


def content(text: str) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}}]})


def head(status: bytes, content_type: bytes, *, length: int | None = None, extra: bytes = b"") -> bytes:
    framing = b"Content-Length: %d\r\n" % length if length is not None else b"Transfer-Encoding: chunked\r\n"
    return b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\n" + framing + extra + b"\r\n"


class HostileBackend:
    def __init__(
        self,
        replies: BookReplies,
        *,
        seed: int,
        share: float,
        faults: list[str] | None = None,
        models_too: bool = False,
        token_delay: float = 0.001,
        port: int = 0,
    ):
        unknown = set(faults or []) - set(FAULTS)
        assert not unknown, f"unknown faults {unknown}"
        self.replies = replies
        self.seed = seed
        self.share = share
        self.faults = sorted(faults or FAULTS)
        self.models_too = models_too
        self.token_delay = token_delay
        self.port = port
        self.requests = 0
        self.drawn: list[str] = []  # the fault (or "ok") each chat request drew, in arrival order
        # the faults drawn by requests for a section's prose: the book reads each of those to its end, where a
        # planning request may be cancelled (enough titles, or its node full) before its fault arrives
        self.drawn_by_prose: list[str] = []
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> HostileBackend:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

    def draw(self) -> str:
        """The fault of the next chat request (or ok): the same for the same seed and request number."""
        rng = random.Random(f"{self.seed}:{self.requests}")
        self.requests += 1
        fault = rng.choice(self.faults) if rng.random() < self.share else "ok"
        self.drawn.append(fault)
        return fault

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.drawn)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.tasks.add(task := asyncio.current_task())  # type: ignore[arg-type]
        try:
            method, path, body = await self._read_request(reader)
            await self._route(method, path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            pass  # the client hung up, or the server stops (a cancelled handler makes 3.11's streams log an error)
        finally:
            self.tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
        header = await reader.readuntil(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        return method, path, await reader.readexactly(length) if length else b""

    async def _route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        if path == "/v1/chat/completions" and method == "POST":
            await self._chat(json.loads(body), writer)
        elif path == "/fake/stats":
            self._json(writer, {"requests": self.requests, "drawn": self.drawn})
        elif self.models_too:
            await self._fault("html_502", {}, writer)
        elif path == "/v1/models":
            self._json(writer, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]})
        else:
            writer.write(head(b"404 Not Found", b"text/plain", length=9) + b"not found")
        await writer.drain()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, value: object) -> None:
        data = json.dumps(value).encode()
        writer.write(head(b"200 OK", b"application/json", length=len(data)) + data)

    async def _chat(self, body: dict, writer: asyncio.StreamWriter) -> None:
        fault = self.draw()
        if section_title(prompt_of(body)) is not None:
            self.drawn_by_prose.append(fault)
        if fault == "ok":
            await self._stream(body, writer, self._pieces(body))
            writer.write(chunk(b"data: [DONE]\n\n") + chunk(b""))
        else:
            await self._fault(fault, body, writer)

    def _pieces(self, body: dict) -> list[bytes]:
        words = self.replies(body).split(" ")
        return [content(word + " ") for word in words[:-1]] + [content(words[-1])]

    async def _stream(self, body: dict, writer: asyncio.StreamWriter, events: list[bytes]) -> None:
        """A 200 event stream of these events, then finish_reason and usage (no [DONE]: the caller's)."""
        writer.write(head(b"200 OK", b"text/event-stream"))
        for data in events:
            writer.write(chunk(data + b"\n\n"))
            await writer.drain()
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
        usage = {"prompt_tokens": 5, "completion_tokens": len(events), "total_tokens": 5 + len(events)}
        tail = [
            event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            event({"choices": [], "usage": usage}),
        ]
        writer.write(b"".join(chunk(data + b"\n\n") for data in tail))

    async def _fault(self, fault: str, body: dict, writer: asyncio.StreamWriter) -> None:
        simple = SIMPLE.get(fault)
        if simple is not None:
            writer.write(simple)
            return
        await getattr(self, "_" + fault)(body, writer)

    async def _headers_then_silence(self, body: dict, writer: asyncio.StreamWriter) -> None:
        writer.write(head(b"200 OK", b"text/event-stream"))
        await writer.drain()
        await asyncio.sleep(3600)

    async def _stall(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    async def _slow_drip(self, body: dict, writer: asyncio.StreamWriter) -> None:
        writer.write(head(b"200 OK", b"text/event-stream"))
        while True:
            writer.write(chunk(b": keep-alive\n\n"))
            await writer.drain()
            await asyncio.sleep(DRIP_S)

    async def _close_early(self, body: dict, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    async def _reset_mid_stream(self, body: dict, writer: asyncio.StreamWriter) -> None:
        pieces = self._pieces(body)
        writer.write(head(b"200 OK", b"text/event-stream"))
        for data in pieces[: max(1, len(pieces) // 2)]:
            writer.write(chunk(data + b"\n\n"))
        await writer.drain()
        writer.transport.abort()

    async def _no_done(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._stream(body, writer, self._pieces(body))
        writer.write(chunk(b""))

    async def _mid_stream(self, body: dict, writer: asyncio.StreamWriter, bad: bytes) -> None:
        """Half the answer, then one bad data line, then the rest as if nothing happened."""
        pieces = self._pieces(body)
        half = max(1, len(pieces) // 2)
        await self._stream(body, writer, [*pieces[:half], bad, *pieces[half:]])
        writer.write(chunk(b"data: [DONE]\n\n") + chunk(b""))

    async def _error_event(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._mid_stream(body, writer, event({"error": {"message": "engine overloaded", "code": 500}}))

    async def _bad_json(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._mid_stream(body, writer, b'data: {"choices": [{"delta": {"content": "cut')

    async def _wrong_shape(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._mid_stream(body, writer, event({"choices": [1, 2, 3]}))

    async def _bad_bytes(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._mid_stream(body, writer, b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9 \xff"}}]}')

    async def _lone_surrogate(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._mid_stream(body, writer, b'data: {"choices": [{"index": 0, "delta": {"content": "x \\ud800 y"}}]}')

    async def _empty(self, body: dict, writer: asyncio.StreamWriter) -> None:
        await self._stream(body, writer, [])
        writer.write(chunk(b"data: [DONE]\n\n") + chunk(b""))

    async def _huge_answer(self, body: dict, writer: asyncio.StreamWriter) -> None:
        piece = content("x" * (HUGE_PIECE - 1) + " ")
        writer.write(head(b"200 OK", b"text/event-stream"))
        for _ in range(HUGE_BYTES // HUGE_PIECE):
            writer.write(chunk(piece + b"\n\n"))
            await writer.drain()

    async def _huge_line(self, body: dict, writer: asyncio.StreamWriter) -> None:
        writer.write(head(b"200 OK", b"text/event-stream") + chunk(content("y" * HUGE_LINE) + b"\n\n"))
        await writer.drain()


def _answer(status: bytes, content_type: bytes, text: bytes, extra: bytes = b"") -> bytes:
    return head(status, content_type, length=len(text), extra=extra) + text


SIMPLE = {
    "http_500": _answer(b"500 Internal Server Error", b"text/plain", b"internal error"),
    "http_503": _answer(b"503 Service Unavailable", b"text/plain", b"loading", b"Retry-After: 0.2\r\n"),
    "http_429": _answer(b"429 Too Many Requests", b"text/plain", b"slow down", b"Retry-After: 0.2\r\n"),
    "http_400": _answer(b"400 Bad Request", b"application/json", b'{"error": "the request exceeds the context"}'),
    "html_502": _answer(b"502 Bad Gateway", b"text/html", HTML),
    "html_200": _answer(b"200 OK", b"text/html; charset=utf-8", HTML),
    "json_200": _answer(b"200 OK", b"application/json", b'{"choices": [{"message": {"content": "whole"}}]}'),
    "garbage_status": b"HTTP/1.1 two hundred-ish\r\n\r\nwhatever",
}


HTML_ONLY = ["html_502", "html_200"]


def hostile_trio(replies: BookReplies, seed: int, share: float) -> list[HostileBackend]:
    """Two backends that fail `share` of their requests in every way, and one that answers nothing but
    HTML error pages (its /v1/models too): the hostile part of the reliability tests' fleet."""
    return [
        HostileBackend(replies, seed=seed, share=share),
        HostileBackend(replies, seed=seed + 100, share=share),
        HostileBackend(replies, seed=seed, share=1.0, faults=HTML_ONLY, models_too=True),
    ]


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.fakes.hostile_fleet", description="a FAKE hostile backend")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share", type=float, default=0.3, help="the chance a chat request draws a fault")
    parser.add_argument("--faults", default="", help="comma list of faults to draw from (default: all)")
    parser.add_argument("--models-too", action="store_true", help="fault /v1/models too (an HTML error page)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--title-prefix", default="Hostile topic")
    args = parser.parse_args(argv)
    faults = [fault for fault in args.faults.split(",") if fault] or None
    replies = BookReplies(title_prefix=args.title_prefix)
    backend = HostileBackend(
        replies, seed=args.seed, share=args.share, faults=faults, models_too=args.models_too, port=args.port
    )
    asyncio.run(serve_until_stopped(backend))


if __name__ == "__main__":
    main()
