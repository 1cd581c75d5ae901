"""A FAKE OpenAI-compatible engine for fast unit tests of logic (caps, balancing, retries, faults).

It is not an LLM: it streams a fixed number of word tokens per request, in the SSE format vLLM and
llama-server use, and keeps a vLLM-style generation counter on /metrics. A body with `n` > 1 gets n choices,
each its own answer, their events interleaved as llama-server's are (the first not choice 0's). Each request
takes the next mode from `modes` (then "ok"): ok, http_500, http_429, reset (connection dropped mid-stream), close_early
(connection dropped before any byte), empty, stall (no bytes until the client gives up), no_done (stream
ends without [DONE]), bad_utf8 (an SSE line that is not UTF-8), huge (a 10 MB answer in 32 KB tokens),
huge_line (a 10 MB answer in one SSE line), bad_json (a 200 answer of chatter with no JSON in it, for
planning prompts), echo_auth (a 500 whose error message, in the OpenAI API's JSON, repeats the Authorization
header it got, as a careless server might). `section_modes` and `plan_modes` are taken first by
section-writing and planning prompts only, so a book-level test can plant a fault where it wants.
It records the most requests it ever had in flight and every Authorization header it was sent.

Run alone (`python -m tests.fakes.fake_engine DELAY JITTER [--port N] [--modes a,b] [--section-modes ...]
[--plan-modes ...] [--retry-after S] [--title-prefix P] [--hold-sections-after N]`) it prints its URL; GET
/fake/stats reads its counters (?lists=1: with the mode and Authorization header of every request), POST
/fake/modes {"modes"|"section_modes"|"plan_modes": [...]} plants more faults, and POST /fake/release lets
held section requests go on.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from aiohttp import web

from tests.fakes import fake_prompts
from tests.fakes.fake_prompts import (
    fake_title,
    letters,
    phrase_answer,
    phrase_level,
    plan_answer,
    plan_level,
    section_point,
    section_title,
)

MODEL = "fake-model"
HUGE_BYTES = 10 * 1024 * 1024
HUGE_PIECE = 32 * 1024  # under aiohttp's SSE line limit, so the client's own answer bound is what trips


TIE_INDEX = 3


class FakeEngine:
    tie_flip_above: int | None = None  # set to plant a near-tie that flips above this many requests in flight

    def __init__(
        self,
        tokens: int = 8,
        token_delay: float = 0.0,
        modes: list[str] | None = None,
        retry_after: float = 0.2,
        reply: Callable[[dict], str] | None = None,
        jitter: float = 0.0,
        section_modes: list[str] | None = None,
        plan_modes: list[str] | None = None,
        port: int = 0,
        section_pause: float = 0.0,
        later_chapters_pause: float = 0.0,
        distinct_choices: bool = True,
        hold_sections_after: int | None = None,
    ):
        self.tokens = tokens
        self.distinct_choices = distinct_choices  # n > 1 choices that repeat one another are marked apart
        self.section_pause = section_pause  # seconds a section request waits before its first byte
        # seconds a chapter's planning request waits before its first byte, for every chapter but the first one
        # asked about: its sections can go out while the others are planned, whatever the timing of the host
        self.later_chapters_pause = later_chapters_pause
        # section requests past this many wait before their first byte until POST /fake/release: a test that
        # stops a run mid-write finds it still writing, however fast the host
        self.hold_sections_after = hold_sections_after
        self.sections_seen = 0
        self.released = asyncio.Event()
        self.chapters_asked: list[str] = []  # the chapters planned, in the order first asked about
        self.reply = reply  # the answer's text from the request body; else "w0 w1 ..." of `tokens` words
        self.jitter = jitter  # a random pause of up to this many seconds before answering
        self.token_delay = token_delay
        self.modes: deque[str] = deque(modes or [])
        self.section_modes: deque[str] = deque(section_modes or [])
        self.plan_modes: deque[str] = deque(plan_modes or [])
        self.modes_used: list[str] = []  # the mode each request got, in arrival order
        self.authorizations: list[str] = []  # the Authorization header of each request ("" when none)
        self.headers: list[dict[str, str]] = []  # every header of each request, names in lower case
        self.retry_after = retry_after
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests = 0
        self.generated = 0
        self.bodies: list[dict] = []
        self.timeline: list[tuple[float, float, str]] = []  # (start, end, prompt) of each finished request
        self.runner: web.AppRunner | None = None
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> FakeEngine:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.chat)  # a text completion: `prompt` in, `text` out
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_get("/fake/prompts", self.prompts)
        app.router.add_get("/fake/timeline", self.timeline_view)
        app.router.add_get("/fake/stats", self.fake_stats)
        app.router.add_post("/fake/modes", self.plant_modes)
        app.router.add_post("/fake/release", self.release)
        # A client that hangs up cancels its handler at once, as vLLM aborts such a request: in_flight and the
        # timeline then match the client's view, with no lag until the next token's write fails.
        self.runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", self.port, backlog=1024)  # load tests connect hundreds at once
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]})

    async def prompts(self, request: web.Request) -> web.Response:
        """Every prompt received so far, for tests that run this fake in another process."""
        return web.json_response([prompt_of(body) for body in self.bodies])

    async def fake_stats(self, request: web.Request) -> web.Response:
        counters = {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "generated": self.generated,
        }
        if request.query.get("lists"):  # long after a big job: only when asked
            counters.update(modes_used=self.modes_used, authorizations=self.authorizations)
        return web.json_response(counters)

    async def plant_modes(self, request: web.Request) -> web.Response:
        planted = await request.json()
        for key in ("modes", "section_modes", "plan_modes"):
            getattr(self, key).extend(planted.get(key, []))
        return web.json_response({"ok": True})

    async def release(self, request: web.Request) -> web.Response:
        self.released.set()
        return web.json_response({"ok": True})

    async def timeline_view(self, request: web.Request) -> web.Response:
        return web.json_response(self.timeline)

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def metrics(self, request: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:generation_tokens counter\n"
            f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}} {self.generated}\n'
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} {self.in_flight}\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.requests += 1
        self.authorizations.append(request.headers.get("Authorization", ""))
        self.headers.append({name.lower(): value for name, value in request.headers.items()})
        mode = self._next_mode(body)
        self.modes_used.append(mode)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        started = time.time()
        try:
            return await self._answer(request, body, mode)
        except ConnectionResetError:  # the client hung up (a planner with every title it needs): stop generating
            return web.Response(status=499)
        finally:
            self.in_flight -= 1
            self.timeline.append((started, time.time(), prompt_of(body)))

    def _next_mode(self, body: dict) -> str:
        prompt = prompt_of(body)
        targeted = (
            self.section_modes
            if section_title(prompt) is not None
            else self.plan_modes
            if plan_level(prompt) is not None
            else None
        )
        if targeted:
            return targeted.popleft()
        return self.modes.popleft() if self.modes else "ok"

    async def _answer(self, request: web.Request, body: dict, mode: str) -> web.StreamResponse:
        if mode == "echo_auth":
            said = f"rejected; you sent Authorization: {request.headers.get('Authorization', '')}"
            return web.json_response({"error": {"message": said}}, status=500)
        if mode == "http_500":
            return web.Response(status=500, text="internal error")
        if mode == "http_429":
            return web.Response(status=429, text="slow down", headers={"Retry-After": str(self.retry_after)})
        if mode == "close_early":
            request.transport.close()
            return web.Response(status=200)
        if mode == "stall":  # no bytes at all; ends once the client has hung up
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.05)
            return web.Response(status=200)
        if self.jitter:
            await asyncio.sleep(random.uniform(0, self.jitter))
        if section_title(prompt_of(body)) is not None:
            await self._section_waits()
        if self.later_chapters_pause and self._a_later_chapter(prompt_of(body)):
            await asyncio.sleep(self.later_chapters_pause)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if mode == "bad_utf8":
            await response.write(b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9 \xff\xfe"}}]}\n\n')
        if choices_of(body) > 1:
            return await self._answer_choices(request, response, body, mode)
        pieces = self._pieces(body, mode)
        count = len(pieces)
        for index, piece in enumerate(pieces):
            await self._event(response, self._chunk(body, index, piece))
            if mode == "reset" and index == count // 2:
                request.transport.close()
                return response
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
        self.generated += count
        finish = "length" if count == body.get("max_tokens") else "stop"
        no_text = {"text": ""} if is_text(body) else {"delta": {}}
        await self._event(response, {"choices": [{"index": 0, **no_text, "finish_reason": finish}]})
        return await self._end(response, mode, count)

    async def _end(self, response: web.StreamResponse, mode: str, count: int) -> web.StreamResponse:
        """The usage event (`count` tokens generated), then [DONE] unless the mode leaves it out."""
        await self._event(
            response,
            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": count, "total_tokens": 5 + count}},
        )
        if mode != "no_done":
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _answer_choices(
        self, request: web.Request, response: web.StreamResponse, body: dict, mode: str
    ) -> web.StreamResponse:
        """n > 1 choices, their events interleaved round by round from the last index down (so the first
        content event is not choice 0's, as llama-server may send it), each choice's finish event after its
        last piece, then one usage event counting every choice's tokens."""
        answers = self._choice_pieces(body, mode)
        events = interleaved(answers)
        no_text = {"text": ""} if is_text(body) else {"delta": {}}
        for sent, (choice, index, piece) in enumerate(events):
            if piece is None:
                finish = "length" if index == body.get("max_tokens") else "stop"
                await self._event(response, {"choices": [{"index": choice, **no_text, "finish_reason": finish}]})
            else:
                await self._event(response, self._chunk(body, index, piece, choice))
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
            if mode == "reset" and sent == len(events) // 2:
                request.transport.close()
                return response
        count = sum(len(pieces) for pieces in answers)
        self.generated += count
        return await self._end(response, mode, count)

    def _choice_pieces(self, body: dict, mode: str) -> list[list[str]]:
        """The pieces of each of the body's n choices: choice 0's those of an answer of one choice, each other
        its own (words marked with its index; a reply asked again: a planning reply draws new titles). A
        reply that repeats an earlier choice's (a section's) opens with a mark of its own, so each differs."""
        answers: list[list[str]] = []
        for choice in range(choices_of(body)):
            pieces = self._pieces(body, mode, choice)
            if self.distinct_choices and pieces and pieces in answers:
                pieces = [f"Sample {letters(choice)}: ", *pieces][: body.get("max_tokens", len(pieces) + 1)]
            answers.append(pieces)
        return answers

    async def _section_waits(self) -> None:
        """A section request's pause, then, past `hold_sections_after` of them, the wait for a release."""
        self.sections_seen += 1
        if self.section_pause:
            await asyncio.sleep(self.section_pause)
        if self.hold_sections_after is not None and self.sections_seen > self.hold_sections_after:
            await self.released.wait()

    def _a_later_chapter(self, prompt: str) -> bool:
        """Whether the prompt plans a chapter other than the first one asked about."""
        if plan_level(prompt) != "chapter":
            return False
        chapter = prompt.split('for the chapter "', 1)[1].split('"', 1)[0]
        if chapter not in self.chapters_asked:
            self.chapters_asked.append(chapter)
        return chapter != self.chapters_asked[0]

    def _chunk(self, body: dict, index: int, piece: str, choice: int = 0) -> dict:
        """One content event (of choice `choice`); with logprobs when asked. A prompt marked [tie] has a
        near-tie at TIE_INDEX that falls the other way while more than `tie_flip_above` requests are in flight
        (FAKE batch nondeterminism, for identity tests)."""
        tied = "[tie]" in prompt_of(body) and index == TIE_INDEX and self.tie_flip_above is not None
        if tied:
            piece = "beta " if self.in_flight > self.tie_flip_above else "alpha "
        content: dict = {"text": piece} if is_text(body) else {"delta": {"content": piece}}
        choice_event: dict = {"index": choice, **content}
        if body.get("logprobs"):
            top = [("alpha ", -0.6931), ("beta ", -0.6932)] if tied else [(piece, -0.05), ("other ", -3.0)]
            if tied and piece == "beta ":
                top = top[::-1]
            if is_text(body):  # the legacy completions shape: parallel lists, top as token -> logprob
                choice_event["logprobs"] = {
                    "tokens": [top[0][0]],
                    "token_logprobs": [top[0][1]],
                    "top_logprobs": [dict(top)],
                }
            else:
                entries = [{"id": zlib.crc32(t.encode()), "token": t, "logprob": lp} for t, lp in top]
                choice_event["logprobs"] = {"content": [{**entries[0], "top_logprobs": entries}]}
        return {"choices": [choice_event]}

    def _pieces(self, body: dict, mode: str, choice: int = 0) -> list[str]:
        """The answer as token-sized pieces, cut at max_tokens like a real engine; `choice` > 0: another
        choice of the same body."""
        if mode == "empty":
            return []
        if mode == "huge":
            return ["x" * (HUGE_PIECE - 1) + " "] * (HUGE_BYTES // HUGE_PIECE)
        if mode == "huge_line":
            return ["y" * HUGE_BYTES]
        if mode == "bad_json":
            return ["Sure! ", "Here ", "is ", "a ", "plan: ", "{titles: ", "[first, ", "second ", "(to be continued"]
        limit = body.get("max_tokens", self.tokens)
        if self.reply is None:
            mark = f".{choice}" if choice else ""
            return [f"w{index}{mark} " for index in range(min(self.tokens, limit))]
        words = self.reply(body).split(" ")
        pieces = [word + " " for word in words[:-1]] + words[-1:]
        return [piece for piece in pieces if piece][:limit]

    async def _event(self, response: web.StreamResponse, payload: dict, *, text: bool = False) -> None:
        payload = {
            "id": "x",
            "object": "text_completion" if text else "chat.completion.chunk",
            "model": MODEL,
            **payload,
        }
        await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")


def choices_of(body: dict) -> int:
    """The choices a body asks for: its `n`, 1 when it has none."""
    n = body.get("n")
    return n if isinstance(n, int) and n > 1 else 1


def interleaved(answers: list[list[str]]) -> list[tuple[int, int, str | None]]:
    """(choice, position, piece) of every event of several choices, round by round, the last choice first
    in each round; a choice's finish event (piece None, position its length) follows its last piece."""
    events: list[tuple[int, int, str | None]] = []
    for position in range(max(len(pieces) for pieces in answers) + 1):
        for choice in reversed(range(len(answers))):
            pieces = answers[choice]
            if position <= len(pieces):
                events.append((choice, position, pieces[position] if position < len(pieces) else None))
    return events


def is_text(body: dict) -> bool:
    """A text completion (/v1/completions): its body has a `prompt`, its answer `text` in each choice."""
    return isinstance(body.get("prompt"), str)


def prompt_of(body: dict) -> str:
    return body["prompt"] if is_text(body) else body["messages"][-1]["content"]


def requested_count(body: dict) -> int:
    return fake_prompts.requested_count(prompt_of(body))


class BookReplies:
    """FAKE model answers for a whole book: unique titles for planning prompts, a paragraph per section."""

    def __init__(self, words: int = 40, section_text: str | None = None, title_prefix: str = "Topic number"):
        self.words = words
        self.title_prefix = title_prefix  # FAKE engines planning one book take titles from stretches of their own
        self.section_text = section_text  # a fixed answer for every section (hostile text, say)
        self.counter = 0
        self.sections_asked: list[str] = []

    def __call__(self, body: dict) -> str:
        prompt = prompt_of(body)
        if "Give it a new" in prompt:
            return f"Title: {self._title()}"
        if prompt.startswith("Your answer stopped"):
            return "and so the section ends here, complete."
        title = section_title(prompt)
        if title is not None:
            self.sections_asked.append(title)
            if self.section_text is not None:
                return self.section_text
            # it opens on its own point, so it is on point by meaning; every sentence after differs (a point
            # letter), so no run of words loops: a loop would be cut
            return (
                section_point(prompt)
                + " "
                + " ".join(
                    f"Point {letters(n)} explains {title}, {letters(n)} again, with care {letters(n)}."
                    for n in range(self.words // 10 + 1)
                )
            )
        if phrase_level(prompt) is not None:
            return phrase_answer(self._title())
        level = plan_level(prompt)
        if level is None:
            return " ".join(f"w{i}" for i in range(self.words))  # any other question: plain words
        return plan_answer(level, [self._title() for _ in range(requested_count(body))])

    def _title(self) -> str:
        self.counter += 1
        return fake_title(self.counter, self.title_prefix)


async def serve_forever(
    port: int,
    token_delay: float,
    jitter: float,
    section_text: str | None = None,
    modes: list[str] | None = None,
    section_modes: list[str] | None = None,
    plan_modes: list[str] | None = None,
    retry_after: float = 0.2,
    title_prefix: str = "Topic number",
    section_pause: float = 0.0,
    later_chapters_pause: float = 0.0,
    hold_sections_after: int | None = None,
) -> None:
    replies = BookReplies(section_text=section_text, title_prefix=title_prefix)
    engine = FakeEngine(
        token_delay=token_delay,
        jitter=jitter,
        reply=replies,
        modes=modes,
        section_modes=section_modes,
        plan_modes=plan_modes,
        retry_after=retry_after,
        port=port,
        section_pause=section_pause,
        later_chapters_pause=later_chapters_pause,
        hold_sections_after=hold_sections_after,
    )
    await serve_until_stopped(engine)


class Serving(Protocol):
    """What serve_until_stopped needs of a FAKE server (FakeEngine, hostile_fleet.HostileBackend)."""

    @property
    def url(self) -> str: ...

    async def start(self) -> object: ...

    async def stop(self) -> None: ...


async def serve_until_stopped(engine: Serving) -> None:
    """Start a FAKE server, print its URL (a test that started its process reads it), and serve until cancelled."""
    await engine.start()
    print(engine.url, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await engine.stop()


def main(argv: list[str] | None = None) -> None:
    """A FAKE engine in its own process, for tests that kill the client or the engine."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.fake_engine", description="a FAKE OpenAI-compatible engine"
    )
    parser.add_argument("delay", type=float, help="seconds between tokens")
    parser.add_argument("jitter", type=float, help="a random pause of up to this many seconds before answering")
    parser.add_argument("--section-text", help="a fixed answer for every section")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--retry-after", type=float, default=0.2, help="the Retry-After of http_429")
    parser.add_argument(
        "--title-prefix", default="Topic number", help="names the stretch of words planned titles come from"
    )
    parser.add_argument(
        "--section-pause", type=float, default=0.0, help="seconds each section request waits before its first byte"
    )
    parser.add_argument(
        "--later-chapters-pause",
        type=float,
        default=0.0,
        help="seconds a chapter's planning request waits before its first byte, for all but the first chapter",
    )
    parser.add_argument(
        "--hold-sections-after",
        type=int,
        default=None,
        help="section requests past this many wait before their first byte until POST /fake/release",
    )
    for name in ("modes", "section-modes", "plan-modes"):
        parser.add_argument(f"--{name}", default="", help="comma list of fault modes")
    args = parser.parse_args(argv)
    split = lambda text: [mode for mode in text.split(",") if mode]  # noqa: E731
    asyncio.run(
        serve_forever(
            args.port,
            args.delay,
            args.jitter,
            args.section_text,
            split(args.modes),
            split(args.section_modes),
            split(args.plan_modes),
            args.retry_after,
            args.title_prefix,
            args.section_pause,
            args.later_chapters_pause,
            hold_sections_after=args.hold_sections_after,
        )
    )


if __name__ == "__main__":
    main()


class FakeEngineThread:
    """FAKE engines served by an event loop in a background thread, for tests that run fanout as a subprocess
    and read the fakes' counters directly. Use as a context manager."""

    def __init__(self, *engines: FakeEngine):
        import threading

        self.engines = engines
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-engines", daemon=True)

    def __enter__(self) -> FakeEngineThread:
        self.thread.start()
        for engine in self.engines:
            asyncio.run_coroutine_threadsafe(engine.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for engine in self.engines:
            asyncio.run_coroutine_threadsafe(engine.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def fake_process(token_delay: float, jitter: float, *flags: str):
    """A FAKE engine in its own process (`python -m tests.fakes.fake_engine`); returns (Popen, base URL)."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_engine", str(token_delay), str(jitter), *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


@contextmanager
def fake_process_serving(token_delay: float, jitter: float, *flags: str) -> Iterator[str]:
    """`fake_process` for the block: yields its base URL, and kills and reaps the process after."""
    process, url = fake_process(token_delay, jitter, *flags)
    try:
        yield url
    finally:
        process.kill()
        process.wait()
