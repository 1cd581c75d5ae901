"""What the open loop sends: synthetic prompts of given token lengths, a dataset, or a book run's own requests.

Takes a spec's workload settings; returns a Workload, which gives request number n its messages, answer cap
and (for a replay) the moment the original run asked it.

- Synthetic: numbered, nonce'd prompts (no two share a prefix, unless shared prefixes are asked for: then
  each starts with its group's prefix, prompts.py), of a token length drawn per request from
  `input_len` (N, or LO-HI uniform, seeded) as the engine counts it, with caps from `output_len`; the
  length is reached by a word count calibrated once against the engine's tokenizer, so each request lands
  within a few tokens of its draw and the record keeps the engine's own count (usage.prompt_tokens).
- Dataset: JSONL, one `{"prompt": str, "max_tokens": int}` a line (max_tokens optional), or ShareGPT-style
  JSON (a list of `{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}`; the first
  human turn is the prompt and the first reply's length in tiktoken cl100k tokens its cap, as vLLM's
  sharegpt dataset does with the model's tokenizer). Prompts go as written, in a seeded shuffle, cycled
  when the run asks for more than the file holds. With multi-turn, a ShareGPT conversation's later
  exchanges come along as follow-up turns (the open loop sends each after the answer before it).
- Replay: a book run's requests.jsonl (every planning and section request, as sent: messages, cap,
  sampling fields, and when it was asked after the job began).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pipeline.bench.load.prompts import FILLER, SharedPrefixes, TokenCounter, numbered, short_prompt
from pipeline.book.requestlog import REQUEST_LOG, read_rows
from pipeline.errors import UsageError


@dataclass(frozen=True)
class Work:
    messages: list[dict[str, str]]
    max_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)  # sampling fields a replayed request carried
    offset_s: float | None = None  # replay: seconds after the original job began
    kind: str = "synthetic"  # synthetic, dataset, plan, section, repair
    prompt_tokens: int | None = None  # replay: the engine's count in the original run
    choices: int = 1  # replay: the samples the request asked for (`n`), as the book's planning asks them
    follow_ups: tuple[tuple[str, int], ...] = ()  # a conversation's later turns: (user message, answer cap)
    turn_numbers: tuple[int, ...] = ()  # the request numbers of those turns, given when scheduled


class Workload(Protocol):
    name: str
    greedy: bool  # temperature 0 and ignore_eos where the engine has it (synthetic and dataset)

    def item(self, number: int) -> Work: ...


@dataclass(frozen=True)
class Lengths:
    """A token count per request: fixed (low == high) or uniform in [low, high], drawn from a seeded stream."""

    low: int
    high: int

    def draw(self, rng: random.Random) -> int:
        return self.low if self.low == self.high else rng.randint(self.low, self.high)

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def parse_lengths(text: str, setting: str) -> Lengths:
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise UsageError(f"setting '{setting}' {text!r}: expected N or LO-HI (whole numbers of tokens)")
    low = int(match[1])
    high = int(match[2]) if match[2] else low
    if low <= 0 or high < low:
        raise UsageError(f"setting '{setting}' {text!r}: lengths must be positive, LO no more than HI")
    return Lengths(low, high)


def filler_words(count: int) -> str:
    """The first `count` words of the filler, repeated as often as needed."""
    return " ".join((FILLER * (count // 40 + 2)).split()[:count])


def user(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


@dataclass
class SyntheticWorkload:
    nonce: str
    output: Lengths
    seed: int
    words_per_token: float | None = None  # calibrated against the engine; None: the short numbered prompts
    head_tokens: int = 0
    input: Lengths | None = None
    prefixes: SharedPrefixes | None = None  # shared prefixes before each prompt (--prefix-len)
    name: str = "synthetic"
    greedy: bool = True

    def item(self, number: int) -> Work:
        rng = random.Random(f"{self.seed}:{number}")
        cap = self.output.draw(rng)
        if self.input is None or self.words_per_token is None:
            own = short_prompt(number, self.nonce)
        else:
            words = max(0, round((self.input.draw(rng) - self.head_tokens) * self.words_per_token))
            own = numbered(number, self.nonce) + filler_words(words)
        return Work(user(own if self.prefixes is None else self.prefixes.before(number, own)), cap)


async def synthetic_workload(
    counter: TokenCounter | None,
    nonce: str,
    input_len: Lengths | None,
    output_len: Lengths,
    seed: int,
    prefixes: SharedPrefixes | None = None,
) -> SyntheticWorkload:
    """Calibrate words per token once, on a prompt as long as the longest draw."""
    workload = SyntheticWorkload(nonce, output_len, seed, input=input_len, prefixes=prefixes)
    if input_len is None or counter is None:
        return workload
    head = numbered(1, nonce)
    workload.head_tokens = await counter.count(head)
    if workload.head_tokens >= input_len.low:
        raise UsageError(f"setting 'input_len' {input_len}: the numbered head and the chat template alone take that")
    probe_words = max(16, input_len.high)
    tokens = await counter.count(head + filler_words(probe_words)) - workload.head_tokens
    workload.words_per_token = probe_words / max(tokens, 1)
    return workload


@dataclass
class DatasetWorkload:
    rows: list[Work]
    seed: int
    name: str = "dataset"
    greedy: bool = True
    order: list[int] = field(default_factory=list)
    conversations: bool = False  # rows are conversations: their later turns take request numbers too
    first_turns: dict[int, int] = field(default_factory=dict)  # conversations: request number -> its draw

    def __post_init__(self) -> None:
        self.order = list(range(len(self.rows)))
        random.Random(self.seed).shuffle(self.order)

    def item(self, number: int) -> Work:
        """Row (number - 1) of the shuffle, cycled; conversations are drawn in the order their first turns
        are numbered, since their later turns take the numbers in between."""
        draw = self.first_turns.setdefault(number, len(self.first_turns)) if self.conversations else number - 1
        return self.rows[self.order[draw % len(self.rows)]]


def load_dataset(
    path: Path, default_cap: int, output_len: Lengths | None, seed: int, *, multi_turn: bool = False
) -> DatasetWorkload:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"setting 'dataset' {path}: cannot read it ({exc})") from None
    stripped = text.lstrip()
    if multi_turn and not stripped.startswith("["):
        raise UsageError(f"setting 'multi_turn': {path} is not a ShareGPT-style JSON list of conversations")
    rows = (
        sharegpt_rows(path, text, multi_turn=multi_turn)
        if stripped.startswith("[")
        else jsonl_rows(path, text, default_cap)
    )
    if output_len is not None:
        rng = random.Random(seed)
        rows = [
            Work(
                row.messages,
                output_len.draw(rng),
                kind="dataset",
                follow_ups=tuple((message, output_len.draw(rng)) for message, _ in row.follow_ups),
            )
            for row in rows
        ]
    if not rows:
        raise UsageError(f"setting 'dataset' {path}: no usable prompts in it")
    kind = "conversations" if multi_turn else "dataset"
    return DatasetWorkload(rows, seed, name=f"{kind} {path.name}", conversations=multi_turn)


def jsonl_rows(path: Path, text: str, default_cap: int) -> list[Work]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"setting 'dataset' {path} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            raise UsageError(f'{where}: expected {{"prompt": "text", "max_tokens": N}}')
        cap = row.get("max_tokens", default_cap)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
            raise UsageError(f"{where}: max_tokens must be a positive whole number, not {cap!r}")
        rows.append(Work(user(row["prompt"]), cap, kind="dataset"))
    return rows


HUMAN, MODEL = ("human", "user"), ("gpt", "assistant", "chatgpt", "bard", "bing")


def exchanges(turns: list[dict]) -> list[tuple[str, str]]:
    """(human message, model reply) pairs from the start of a conversation, while they alternate; a system
    turn is skipped, and the conversation ends at the first turn out of order or without text."""
    pairs, waiting = [], None
    for turn in turns:
        speaker, value = turn.get("from"), turn.get("value")
        if speaker == "system":
            continue
        if not isinstance(value, str) or not value.strip():
            break
        if waiting is None and speaker in HUMAN:
            waiting = value
        elif waiting is not None and speaker in MODEL:
            pairs.append((waiting, value))
            waiting = None
        else:
            break
    return pairs


def sharegpt_rows(path: Path, text: str, *, multi_turn: bool = False) -> list[Work]:
    """The first exchange of each conversation (vLLM's sharegpt dataset), or with `multi_turn` every
    exchange while they alternate: later ones become follow-up turns, each capped at its reply's length."""
    from pipeline.bench.load.prompts import TiktokenCounter

    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"setting 'dataset' {path} line {exc.lineno}: not JSON ({exc.msg})") from None
    encoding = TiktokenCounter().encoding
    rows = []
    for index, entry in enumerate(entries):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise UsageError(f"setting 'dataset' {path} entry {index}: expected a 'conversations' list of turns")
        pairs = exchanges(turns)
        if not pairs:
            continue  # vLLM's sharegpt loader also skips conversations without a prompt and a reply
        caps = [len(encoding.encode(reply)) for _, reply in pairs]
        if caps[0] < 4:  # vLLM drops replies shorter than 4 tokens
            continue
        follow_ups = tuple((human, max(cap, 1)) for (human, _), cap in zip(pairs[1:], caps[1:])) if multi_turn else ()
        rows.append(Work(user(pairs[0][0]), caps[0], kind="dataset", follow_ups=follow_ups))
    return rows


@dataclass
class ReplayWorkload:
    """A book run's requests in the order they were asked, with their original times."""

    rows: list[Work]
    source: Path
    name: str = "replay"
    greedy: bool = False

    def item(self, number: int) -> Work:
        return self.rows[number - 1]


def logged_rows(path: Path, *, setting: str) -> list[dict[str, Any]]:
    """A run's requests.jsonl as rows, their source passages put back (book/requestlog.py's read_rows)."""
    try:
        return read_rows(path)
    except ValueError:
        raise UsageError(f"setting '{setting}' {path}: a line is not JSON") from None
    except KeyError as missing:
        raise UsageError(f"setting '{setting}' {path}: passage {missing} is not in its passages.jsonl") from None


def load_replay(run_dir: Path) -> ReplayWorkload:
    path = run_dir / REQUEST_LOG
    if not path.is_file():
        raise UsageError(
            f"setting 'workload' {run_dir}: no {REQUEST_LOG} in it (book runs record their requests there)"
        )
    rows = []
    for number, row in enumerate(logged_rows(path, setting="workload"), 1):
        try:
            rows.append(
                Work(
                    row["messages"],
                    int(row["max_tokens"]),
                    row.get("extra", {}),
                    float(row["t_asked"]),
                    row["kind"],
                    row.get("prompt_tokens"),
                    choices=max(1, int(row.get("choices") or 1)),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"setting 'workload' {path} line {number}: not a request record") from None
    if not rows:
        raise UsageError(f"setting 'workload' {path}: no requests in it")
    rows.sort(key=lambda w: w.offset_s or 0.0)
    return ReplayWorkload(rows, path, name=f"replay of {run_dir.name}")


@dataclass
class WorkloadPrompts:
    """A synthetic or dataset workload as the closed loop's prompts; a dataset's rows keep their own caps
    (their max_tokens, a ShareGPT reply's length, or --output-len), synthetic prompts take the ladder's."""

    workload: Workload
    own_caps: bool = False

    def prompt(self, number: int) -> str:
        return self.workload.item(number).messages[-1]["content"]

    def cap(self, number: int) -> int | None:
        return self.workload.item(number).max_tokens if self.own_caps else None
