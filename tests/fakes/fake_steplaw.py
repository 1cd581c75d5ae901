"""A FAKE engine that follows a step-time law, for bench tests: not an LLM.

Every engine step advances each running request by one token and takes `a_ms + b_ms * running` milliseconds
(default 12.94 ms + 0.2451 ms per stream: one data-centre GPU's measured law). Steps are kept on an absolute
clock, so a late wake-up is made good by the next step and the law holds on average. Like vLLM, it runs at most
`max_seqs` requests (the rest wait), exposes `vllm:generation_tokens_total` updated every step, running, waiting,
KV use and a per-step histogram count on /metrics, and names itself `owned_by: vllm`; like vLLM it cannot report
its slot count. Answers are `max_tokens` tokens long (as with ignore_eos). A body with `n` > 1 runs n sequences,
each its own answer in the batch (as vLLM's parallel sampling does), their events told apart by `index`; the
usage and [DONE] follow the last.

A token is a word of the messages' contents. Like vLLM's automatic prefix caching it keeps full blocks of
`BLOCK` tokens, each named by the hash of everything before it, in an LRU of `cache_blocks` blocks: a request
admitted finds the longest run of its blocks already there (never its whole prompt: the last token is always
computed), reports it as `usage.prompt_tokens_details.cached_tokens` and on `vllm:prefix_cache_hits_total` /
`vllm:prefix_cache_queries_total`, and adds its blocks. Prefill costs `prefill_ms` per uncached token on the
step that admits it (0 by default: the step law alone). POST /reset_prefix_cache empties the cache, and
POST /tokenize counts the words of `prompt` or `messages`, as vLLM's does its tokens.

By default a planning prompt gets made-up words for titles (tests/fakes/fake_prompts.py), for the fault tests. A
`capable` engine answers as a capable model would (tests/fakes/fake_capable.py): titles and points about the
request that the planner's policy and the judges take, and sections that stay on their own point, at the same
lengths (a section `max_tokens` words), so the step law is the same.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httptools

from tests.fakes.fake_capable import capable_pieces, warm_up
from tests.fakes.fake_prompts import fake_title, fake_words, plan_answer, plan_level, requested_count, section_point

MODEL = "fake-steplaw"
BLOCK = 16  # tokens a cache block holds (vLLM's default block size)
MAX_BACKLOG_S = 0.5  # after a stall longer than this the clock restarts instead of catching up
EVENT_HEAD = (
    'data: {"id":"x","object":"chat.completion.chunk","model":"' + MODEL + '","choices":[{"index":0,"delta":{"content":'
).encode()
TEXT_EVENT_HEAD = (
    'data: {"id":"x","object":"text_completion","model":"' + MODEL + '","choices":[{"index":0,"text":'
).encode()
STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"


@dataclass
class _Running:
    connection: _Connection
    pieces: list[str]
    max_tokens: int
    prompt_tokens: int
    sent: int = 0
    log: dict | None = None  # this request's entry in the engine's own per-request log
    tokens: list[str] | None = None  # the prompt's tokens, for the prefix cache at admission
    cached: int = 0
    text: bool = False  # a text completion (/v1/completions): `text` in each choice, not `delta.content`
    index: int = 0  # its choice in a request for n > 1
    group: _Group | None = None  # the request's sequences, when it asked for n > 1


@dataclass
class _Group:
    """The n sequences of one request: the usage and [DONE] go out once the last has finished."""

    left: int
    completion_tokens: int = 0


class PrefixCache:
    """Full blocks of BLOCK tokens keyed by a hash of every token up to the block's end, least recently used
    first out."""

    def __init__(self, blocks: int) -> None:
        self.capacity = blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = 0
        self.hits = 0

    def admit(self, tokens: list[str]) -> int:
        """Tokens found cached (whole blocks, never the last token); every full block is then cached."""
        keys, key = [], 0
        for end in range(BLOCK, len(tokens) + 1, BLOCK):
            key = hash((key, tuple(tokens[end - BLOCK : end])))
            keys.append(key)
        found = 0
        for key in keys:
            if key not in self.blocks:
                break
            found += 1
        cached = min(found * BLOCK, (len(tokens) - 1) // BLOCK * BLOCK)
        for key in keys:
            self.blocks[key] = None
            self.blocks.move_to_end(key)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        self.queries += len(tokens)
        self.hits += cached
        return cached

    def reset(self) -> None:
        self.blocks.clear()


class StepLawEngine:
    """Served by a lean asyncio Protocol (httptools parses requests): each step writes every running
    request's next event straight to its socket, so the fake's own CPU stays well below a client's and
    the law, not the fake, sets the pace at 1,536 streams."""

    def __init__(
        self,
        a_ms: float = 12.94,
        b_ms: float = 0.2451,
        max_seqs: int = 256,
        *,
        prefill_ms: float = 0.0,
        cache_blocks: int = 65536,
        capable: bool = False,
    ):
        self.a_ms, self.b_ms, self.max_seqs, self.prefill_ms = a_ms, b_ms, max_seqs, prefill_ms
        self.capable = capable  # answers as a capable model would (tests/fakes/fake_capable.py)
        self.cache = PrefixCache(cache_blocks)
        self.prefill_due = 0  # uncached tokens admitted since the last step
        self.running: list[_Running] = []
        self.waiting: list[_Running] = []
        self.generated = 0
        self.prompt_tokens = 0
        self.steps = 0
        self.requests = 0
        self.prompts: list[str] = []
        self.log: list[dict] = []  # per request: prompt head, arrival, every event's send time, end (monotonic)
        self.wake = asyncio.Event()
        self.server: asyncio.AbstractServer | None = None
        self.stepper: asyncio.Task | None = None
        self.port = 0
        self.events: dict[str, bytes] = {}  # chunk-encoded content event per piece of text

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def law_rate(self, streams: int) -> float:
        """Tokens per second the law gives at `streams` running requests."""
        return streams * 1000 / (self.a_ms + self.b_ms * streams)

    async def start(self) -> StepLawEngine:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _Connection(self), "127.0.0.1", 0, backlog=4096)
        self.port = self.server.sockets[0].getsockname()[1]
        self.stepper = asyncio.create_task(self.step_loop())
        return self

    async def stop(self) -> None:
        if self.stepper is not None:
            self.stepper.cancel()
        if self.server is not None:
            self.server.close()

    async def step_loop(self) -> None:
        next_t = time.monotonic()
        while True:
            self._admit()
            if not self.running:
                self.wake.clear()
                await self.wake.wait()
                next_t = time.monotonic()
                continue
            batch = list(self.running)
            next_t += (self.a_ms + self.b_ms * len(batch) + self.prefill_ms * self.prefill_due) / 1000
            self.prefill_due = 0
            now = time.monotonic()
            if now - next_t > MAX_BACKLOG_S:
                next_t = now
            await asyncio.sleep(max(0.0, next_t - now))
            self._step(batch)

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.max_seqs:
            request = self.waiting.pop(0)
            if request.tokens is not None:
                request.cached = self.cache.admit(request.tokens)
                self.prefill_due += len(request.tokens) - request.cached
            self.running.append(request)

    def _step(self, batch: list[_Running]) -> None:
        for request in batch:
            if request.connection.closed:
                self.running.remove(request)
                continue
            request.connection.send(self._event(request.pieces[request.sent], text=request.text, index=request.index))
            if request.log is not None:
                request.log["events"].append(time.monotonic())
            request.sent += 1
            if request.sent == len(request.pieces):
                self.running.remove(request)
                self._finish(request)
        self.generated += len(batch)
        self.steps += 1

    def _event(self, piece: str, *, text: bool, index: int = 0) -> bytes:
        key = f"{'text' if text else 'chat'}:{index}:{piece}"
        event = self.events.get(key)
        if event is None:
            closing = b"}]}\n\n" if text else b"}}]}\n\n"
            head = TEXT_EVENT_HEAD if text else EVENT_HEAD
            head = head.replace(b'"index":0', b'"index":%d' % index)
            event = _chunk(head + json.dumps(piece).encode() + closing)
            self.events[key] = event
        return event

    @staticmethod
    def _no_text(request: _Running) -> dict:
        return {"text": ""} if request.text else {"delta": {}}

    def _finish(self, request: _Running) -> None:
        count = request.sent
        finish = "length" if count == request.max_tokens else "stop"
        no_text = {"text": ""} if request.text else {"delta": {}}
        ended = _sse({"choices": [{"index": request.index, **no_text, "finish_reason": finish}]})
        group = request.group
        if group is not None:
            group.left -= 1
            group.completion_tokens += count
            if group.left:
                request.connection.send(_chunk(ended))
                return
            count = group.completion_tokens
        usage = {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": count,
            "total_tokens": request.prompt_tokens + count,
            "prompt_tokens_details": {"cached_tokens": request.cached},
        }
        tail = ended + _sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"
        request.connection.send(_chunk(tail) + b"0\r\n\r\n")
        if request.log is not None:
            request.log["done"] = time.monotonic()
        request.connection.done()

    # ------------------------------------------------------------ requests

    def handle(self, connection: _Connection, method: bytes, path: str, body: bytes) -> None:
        if method == b"POST" and path.endswith("/chat/completions"):
            self.chat(connection, json.loads(body))
        elif method == b"POST" and path.endswith("/v1/completions"):
            self.chat(connection, json.loads(body), text=True)
        elif path.endswith("/v1/models"):
            connection.reply(
                json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm"}]}),
                "application/json",
            )
        elif path == "/metrics":
            connection.reply(self.metrics(), "text/plain")
        elif method == b"POST" and path == "/reset_prefix_cache":
            self.cache.reset()
            connection.reply("", "application/json")
        elif method == b"POST" and path == "/tokenize":
            self.tokenize(connection, json.loads(body))
        elif path == "/fake/prompts":
            connection.reply(json.dumps(self.prompts), "application/json")
        elif path == "/fake/log":
            connection.reply(json.dumps(self.log), "application/json")
        else:
            connection.reply('{"error": "not found"}', "application/json", status=b"404 Not Found")

    def metrics(self) -> str:
        label = f'{{engine="0",model_name="{MODEL}"}}'
        return (
            f"vllm:generation_tokens_total{label} {self.generated}\n"
            f"vllm:prompt_tokens_total{label} {self.prompt_tokens}\n"
            f"vllm:num_requests_running{label} {len(self.running)}\n"
            f"vllm:num_requests_waiting{label} {len(self.waiting)}\n"
            f"vllm:kv_cache_usage_perc{label} {len(self.running) / self.max_seqs}\n"
            f"vllm:iteration_tokens_total_count{label} {self.steps}\n"
            f"vllm:prefix_cache_queries_total{label} {self.cache.queries}\n"
            f"vllm:prefix_cache_hits_total{label} {self.cache.hits}\n"
        )

    def tokenize(self, connection: _Connection, body: dict) -> None:
        if "prompt" not in body and "messages" not in body:  # vLLM's request has one of the two
            connection.reply('{"error": "prompt or messages"}', "application/json", status=b"400 Bad Request")
            return
        tokens = prompt_tokens(body)
        connection.reply(json.dumps({"count": len(tokens), "tokens": list(range(len(tokens)))}), "application/json")

    def chat(self, connection: _Connection, body: dict, *, text: bool = False) -> None:
        """A chat completion, or with `text` a text completion (`prompt` in, `text` out)."""
        self.requests += 1
        content = prompt_text(body)
        self.prompts.append(content)
        tokens = prompt_tokens(body)
        prompt = len(tokens)
        self.prompt_tokens += prompt
        connection.send(STREAM_HEAD + b"\r\n")
        entry = {"prompt": content[:24], "arrived": time.monotonic(), "events": [], "done": None, "text": text}
        self.log.append(entry)
        n = body.get("n") if isinstance(body.get("n"), int) and body["n"] > 1 else 1
        group = _Group(left=n) if n > 1 else None
        for index in range(n):  # one log entry a request: its choice 0's events
            self.waiting.append(
                _Running(
                    connection, self.pieces(body, index), int(body.get("max_tokens", 16)), prompt,
                    log=entry if index == 0 else None, tokens=tokens, text=text, index=index, group=group,
                )
            )  # fmt: skip
        self.wake.set()

    def pieces(self, body: dict, sample: int) -> list[str]:
        """The answer's pieces (a token each) for the request's sample number `sample`."""
        return capable_pieces(body, sample) if self.capable else answer_pieces(body)


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests one after another (keep-alive unless the client says
    close), each answered by the engine."""

    def __init__(self, engine: StepLawEngine) -> None:
        self.engine = engine
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.url = b""
        self.body = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def connection_lost(self, exc) -> None:
        self.closed = True

    def on_message_begin(self) -> None:
        self.url, self.body = b"", b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()
        path = self.url.decode("latin-1").split("?", 1)[0]
        self.engine.handle(self, self.parser.get_method(), path, self.body)

    def send(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def reply(self, text: str, content_type: str, status: bytes = b"200 OK") -> None:
        payload = text.encode()
        self.send(
            b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, content_type.encode(), len(payload), payload)
        )
        self.done()

    def done(self) -> None:
        if not self.keep_alive and not self.closed:
            self.transport.close()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(payload: dict) -> bytes:
    return (
        b"data: "
        + json.dumps({"id": "x", "object": "chat.completion.chunk", "model": MODEL, **payload}).encode()
        + b"\n\n"
    )


def prompt_tokens(body: dict) -> list[str]:
    """The fake's tokens: the words of every message's content (or of `prompt`), in order."""
    if isinstance(body.get("prompt"), str):
        return body["prompt"].split()
    return " ".join(str(m.get("content", "")) for m in body.get("messages", [])).split()


def prompt_text(body: dict) -> str:
    """What was asked: a text completion's prompt, or the last message's content."""
    return body["prompt"] if isinstance(body.get("prompt"), str) else body["messages"][-1]["content"]


def answer_pieces(body: dict) -> list[str]:
    """A planning prompt gets a numbered list of unique headings (one word a token); anything else gets
    `max_tokens` tokens, as with ignore_eos: a section its own point's words first (so it is on point by
    meaning), then filler."""
    limit = int(body.get("max_tokens", 16))
    prompt = prompt_text(body)
    level = plan_level(prompt)
    if level is None:
        opening = [word + " " for word in section_point(prompt).split()]
        return (opening + [f"t{i} " for i in range(1, limit + 1)])[:limit]
    global _TITLES
    titles = []
    for _ in range(requested_count(prompt)):
        _TITLES += 1
        titles.append(fake_title(_TITLES))
    text = plan_answer(level, titles, "Step law book")
    return [word + " " for word in text.split(" ")][:limit]


_TITLES = 0


@contextmanager
def steplaw_in_thread(
    *laws: tuple[float, float], prefill_ms: float = 0.0, max_seqs: int = 256
) -> Iterator[list[StepLawEngine]]:
    """FAKE step-law engines served from their own event loop in a thread, for tests that run the CLI
    (which starts its own loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def make(a_ms: float, b_ms: float) -> StepLawEngine:
        return await StepLawEngine(a_ms, b_ms, max_seqs, prefill_ms=prefill_ms).start()

    engines = [asyncio.run_coroutine_threadsafe(make(a, b), loop).result(10) for a, b in laws]
    try:
        yield engines
    finally:
        for engine in engines:
            asyncio.run_coroutine_threadsafe(engine.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def steplaw_process(
    count: int = 1,
    a_ms: float = 12.94,
    b_ms: float = 0.2451,
    max_seqs: int = 256,
    *,
    plans: bool = False,
    capable: bool = False,
) -> Iterator[list[str]]:
    """FAKE step-law engines in their own process, for tests that check the law itself: a test client's
    garbage collection or CPU can then not stall the engines' clock. Yields their /v1 URLs. `plans`: they will
    answer planning prompts, so the FAKE titles' vocabulary is built before they serve (3.3 s on 2 cores; built
    in the first planning request it held that request's first token back as long). `capable`: they answer as a
    capable model would (tests/fakes/fake_capable.py)."""
    numbers = [str(count), str(a_ms), str(b_ms), str(max_seqs)]
    modes = (["--capable"] if capable else []) + (["plans"] if plans else [])
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_steplaw", *numbers, *modes],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield process.stdout.readline().split()
    finally:
        process.kill()
        process.wait()


def log_of(url: str) -> list[dict]:
    """The per-request log of an engine started by `steplaw_process`: arrival, event and end times
    (time.monotonic, the same clock as the client's on this machine)."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/fake/log") as response:
        return json.load(response)


def prompts_of(url: str) -> list[str]:
    """The prompts an engine started by `steplaw_process` was asked, in order."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/fake/prompts") as response:
        return json.load(response)


async def _serve(count: int, a_ms: float, b_ms: float, max_seqs: int, *, plans: bool, capable: bool = False) -> None:
    if plans and not capable:
        fake_words()
    if capable:
        warm_up()
    engines = [await StepLawEngine(a_ms, b_ms, max_seqs, capable=capable).start() for _ in range(count)]
    print(" ".join(engine.url for engine in engines), flush=True)
    await asyncio.Event().wait()


if (
    __name__ == "__main__"
):  # FAKE step-law engines in their own process: python -m tests.fakes.fake_steplaw N [A B SEQS] [--capable] [plans]
    arguments = [x for x in sys.argv if x != "--capable"]
    given = [x for x in arguments[2:5] if x != "plans"]
    numbers = [float(x) for x in given] + [12.94, 0.2451, 256][len(given) :]
    asyncio.run(
        _serve(
            int(arguments[1]), numbers[0], numbers[1], int(numbers[2]),
            plans=arguments[-1] == "plans", capable="--capable" in sys.argv,
        )
    )  # fmt: skip
