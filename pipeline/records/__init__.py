"""Typed records passed between stages. Timestamps are stored raw (time.monotonic seconds for
intervals, wall-clock only where it says so); rates and latencies are derived from them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from enum import Enum, StrEnum
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.records.sources import Passage


class EngineKind(str, Enum):
    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llama.cpp"
    TGI = "tgi"
    OLLAMA = "ollama"
    UNKNOWN = "unknown"


class PdfEngine(StrEnum):
    """What typesets a book's PDF: Typst (one compile, pipeline/typeset/typst.py) or WeasyPrint (parts in a
    process pool, merged: pipeline/typeset/parts.py). The HTML and EPUB editions are WeasyPrint's HTML either way."""

    TYPST = "typst"
    WEASYPRINT = "weasyprint"


class WarmSchedule(StrEnum):
    """When the sections that share a chapter's prompt follow the one sent first (pipeline/book/warm.py)."""

    AUTO = "auto"  # as the leader's engine keeps prompts (pipeline/backends/engines.py `prefix_ready`)
    ANSWER = "answer"  # once its answer is in: its slot is free again and holds its prompt (llama.cpp)
    FIRST_TOKEN = "first-token"  # once its first token is in: its prompt's blocks are computed (vLLM, SGLang)
    OFF = "off"  # all at once, wherever a slot is free


class PlanSchedule(StrEnum):
    """When a planned section is handed to the writer (pipeline/book/plan/planner.py)."""

    STREAMED = "streamed"  # the moment its line is planned; scored once its chapter is whole (book/write.py)
    PIPELINED = "pipelined"  # once its chapter has every section
    BARRIER = "barrier"  # once the whole outline is planned, level by level (seed 003's schedule)


class PlanMode(StrEnum):
    """How the planner gets a node's titles (pipeline/book/plan/planner.py)."""

    GIVEN = "given"  # the model phrases a title for each facet or concern the plan gives (meaning/given.py)
    OPEN = "open"  # the model lists the node's children and the planner chooses among them (book/plan/asking.py)
    AUTO = "auto"  # given for a small model (the `small` sampling profile), open for the rest


BOOK_SCHEDULE = PlanSchedule.STREAMED  # `fanout book`'s, chosen by measurement (docs/measurements.md "Schedules")


class Backend(BaseModel):
    """One OpenAI-compatible server. `base_url` ends in /v1; the API key is read from `api_key_env`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    base_url: str
    model: str | None = None
    cap: int = Field(default=16, gt=0)
    api_key_env: str | None = None  # none: OPENAI_API_KEY, where set
    headers: dict[str, str] = Field(default_factory=dict)  # sent with every request
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into every request body, last
    client: str = "fast"  # fast (httptools, no proxies) or sdk (the openai SDK over httpx)

    @field_validator("base_url")
    @classmethod
    def _normalise_url(cls, url: str) -> str:
        url = url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def root_url(self) -> str:
        """The server root, where /metrics, /health and /props live."""
        return self.base_url[: -len("/v1")]


class EngineInfo(BaseModel):
    kind: EngineKind = EngineKind.UNKNOWN
    version: str | None = None
    models: list[str] = Field(default_factory=list)
    has_metrics: bool = False
    counts_per_step: bool = False  # does the generated-token counter move every step, or at request end
    slots: int | None = None  # only engines that report it (llama.cpp /props total_slots)
    context: int | None = None  # tokens one request may hold, prompt and answer, as the engine reports it


class CacheResetDone(BaseModel):
    """One backend's prefix cache emptied, or not, before a bench level or repetition."""

    backend: str
    asked: str | None  # e.g. "POST /reset_prefix_cache"; None: the engine offers no way
    done: bool  # every call answered 2xx
    statuses: list[int] = Field(default_factory=list)  # one a call (one a slot on llama.cpp)
    note: str = ""  # the engine's caveat, why nothing was asked, or what failed


class Endpoint(StrEnum):
    """Which OpenAI-compatible endpoint a request goes to: chat completions (messages with roles, the model's
    chat template applied by the engine) or text completions (one prompt, no template: base models, and
    benchmarks that want no template tokens). vLLM, SGLang, llama.cpp's server, TGI and Ollama serve both."""

    CHAT = "chat"
    COMPLETIONS = "completions"

    @property
    def path(self) -> str:
        """Its path under a backend's base URL (which ends in /v1)."""
        return "/chat/completions" if self is Endpoint.CHAT else "/completions"


class ChatRequest(BaseModel):
    """One completion to send. `extra` carries engine-specific body fields (response_format, ...). To the
    completions endpoint, `messages` must be one user message: its text is sent as the `prompt`."""

    messages: list[dict[str, str]]
    endpoint: Endpoint = Endpoint.CHAT
    max_tokens: int = Field(default=512, gt=0)
    temperature: float = 0.0
    extra: dict[str, Any] = Field(default_factory=dict)
    keep_token_times: bool = False
    tag: str = ""  # the caller's id for the request (section id, bench request number)
    choices: int = Field(default=1, ge=1)  # samples of the one prompt (the OpenAI `n`): one prefill, N answers
    # the user's source passages its messages show: requests.jsonl names them by number (book/requestlog.py)
    passages: list[Passage] = Field(default_factory=list, exclude=True)

    @model_validator(mode="after")
    def _one_prompt_for_completions(self) -> ChatRequest:
        if self.endpoint is Endpoint.COMPLETIONS and [m.get("role") for m in self.messages] != ["user"]:
            raise ValueError("a text completion takes one user message, its prompt (no roles, no history)")
        return self

    @property
    def prompt(self) -> str:
        """The text a completions request sends: its one user message."""
        return self.messages[0]["content"]


# HTTP statuses that name the request itself (malformed, too large, a prompt past the context): a backend
# that answers one is not asked the request again, the others are (their context may be larger).
REQUEST_FAULT_STATUSES = frozenset({400, 413, 414, 422, 431})


class Outcome(StrEnum):
    """How one attempt of a request ended: the one list of outcomes, and what each one means.

    Recorded as its value, except HTTP, recorded with its status (`http_500`, `http_429`). An outcome that
    says nothing of the backend (the server dropped an idle keep-alive before the first byte; our own client
    worker process ended) is asked again at once on the same slot, is not held against the backend, and is
    not a request error. Every other failure is the backend's fault and the request is asked again on
    another backend (`blames_request` names the only exceptions). The pool, the book's stats, the request
    log and the bench all read it from here."""

    OK = "ok"
    CONNECT = "connect"
    TIMEOUT = "timeout"
    CUT_BEFORE_FIRST_BYTE = "cut_before_first_byte"
    CLIENT_WORKER_LOST = "client_worker_lost"
    STREAM_CUT = "stream_cut"  # the connection dropped mid-answer
    STREAM_ERROR = "stream_error"  # the server sent an error event mid-stream
    BAD_EVENT = "bad_event"
    BAD_RESPONSE = "bad_response"
    NOT_EVENT_STREAM = "not_event_stream"  # a 200 answer of another content type (an HTML error page, JSON)
    BAD_UTF8 = "bad_utf8"
    EMPTY = "empty"
    OVERSIZED = "oversized"
    HTTP = "http"
    CANCELLED = "cancelled"  # its caller stopped it (the request log only; never an attempt's failure)

    @classmethod
    def of(cls, recorded: str) -> Outcome:
        """The outcome a recorded name stands for (`http_503` -> HTTP)."""
        return cls.HTTP if recorded.startswith("http_") else cls(recorded)

    @staticmethod
    def http(status: int) -> str:
        """The recorded name of an HTTP error status."""
        return f"http_{status}"

    @staticmethod
    def blames_request(recorded: str) -> bool:
        """The rule of whose fault a failed attempt is. Only an HTTP status that names the request itself
        (REQUEST_FAULT_STATUSES: malformed, too large, a prompt longer than the context) is the request's:
        the backend that said so is not asked it again, and once every backend has said so the request
        fails at once. Everything else a server can do wrong (errors, cuts, stalls, empty, oversized or
        undecodable answers, an HTML page for a stream) is the backend's, and the request is asked again
        on another backend while one can answer."""
        return recorded.startswith("http_") and recorded[5:].isdigit() and int(recorded[5:]) in REQUEST_FAULT_STATUSES

    @property
    def asked_again_at_once(self) -> bool:
        return self in (Outcome.CUT_BEFORE_FIRST_BYTE, Outcome.CLIENT_WORKER_LOST)

    @property
    def request_error(self) -> bool:
        """A failed attempt, counted as a request error (whoever's fault it was)."""
        return self not in (Outcome.OK, Outcome.CANCELLED) and not self.asked_again_at_once


class Attempt(BaseModel):
    """One try of a request on one backend."""

    backend: str
    t_start: float
    t_end: float
    outcome: str  # an Outcome's recorded name: "ok", "connect", "cut_before_first_byte", "http_500", ...
    detail: str = ""

    @property
    def kind(self) -> Outcome:
        return Outcome.of(self.outcome)


class Completion(BaseModel):
    """A finished streaming answer, with its raw timestamps (time.monotonic). Of a request for several
    choices, `text`, `finish_reason`, `chunks`, `token_times` and `logprobs` are choice 0's, the other
    choices' texts and finish_reasons are in `more_*`, and usage counts every choice."""

    tag: str = ""
    backend: str
    model: str | None = None
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    t_sent: float
    t_first_token: float | None
    t_done: float
    chunks: int = 0
    token_times: list[float] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] | None = None  # per token, when asked for: id, token, logprob, top_logprobs
    attempts: list[Attempt] = Field(default_factory=list)
    cached_tokens: int | None = None  # prompt tokens the engine took from its prefix cache (None: not told)
    cached_source: str | None = None  # where cached_tokens came from: usage.prompt_tokens_details, timings.cache_n
    prefill_ms: float | None = None  # the engine's own prompt-processing time (llama.cpp timings.prompt_ms)
    request_id: str | None = None  # the X-Request-Id this answer's attempt was sent with
    response_id: str | None = None  # the engine's id of the answer (the events' `id`), to join with its logs
    more_texts: list[str] = Field(default_factory=list)  # choices 1..N-1's texts, in index order ("": none came)
    more_finish_reasons: list[str | None] = Field(default_factory=list)  # their finish_reasons, likewise

    @property
    def ttft(self) -> float | None:
        return None if self.t_first_token is None else self.t_first_token - self.t_sent

    @property
    def reissued(self) -> int:
        """Attempts that were cut before their first byte (an idle keep-alive closed by the server)."""
        return sum(a.kind is Outcome.CUT_BEFORE_FIRST_BYTE for a in self.attempts)

    @property
    def failed_attempts(self) -> int:
        return sum(a.kind.request_error for a in self.attempts)


SMALL_PROFILE = "small"  # the sampling profile of a small model (pipeline/book/profiles.py)


class Author(StrEnum):
    """Who wrote a book, as the audit's rules and judges see it: a small model (a run whose sampling profile is
    `small`), or a capable author (any other model, or a person: a Markdown book from anywhere). Each rule of the
    audit says which kinds it is shown to judge well (pipeline/audit/rules.py); on another it is a figure."""

    SMALL = "small"
    CAPABLE = "capable"


class SamplingProfile(BaseModel):
    """How a book's requests sample (profiles.py holds the named ones); engines take what they honour."""

    model_config = ConfigDict(extra="forbid")

    name: str
    temperature: float = Field(ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    min_p: float | None = Field(default=None, ge=0, lt=1)
    top_k: int | None = Field(default=None, gt=0)
    repetition_penalty: float | None = Field(default=None, gt=0)  # llama.cpp calls it repeat_penalty
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    dry_multiplier: float | None = Field(default=None, ge=0)  # llama.cpp's DRY sampler
    seed: int | None = None  # None: engines pick their own
    stop: list[str] = Field(default_factory=list)
    plan_temperature: float | None = Field(default=None, ge=0)  # planning answers; None: temperature

    @property
    def planning_temperature(self) -> float:
        return self.temperature if self.plan_temperature is None else self.plan_temperature

    @property
    def small(self) -> bool:
        """The profile of a small model, whose planning lines are mostly unusable: it plans from what is given,
        samples every question several times, and is held to the rules fitted to a small model's junk."""
        return self.name == SMALL_PROFILE

    @property
    def author(self) -> Author:
        """The kind of author whose book this profile writes."""
        return Author.SMALL if self.small else Author.CAPABLE


TOKENS_PER_WORD = 1.4  # English prose with Markdown marks, SmolLM2's and Llama's tokenizers alike
HEADROOM = 1.3  # a model asked for N words often writes more; past 1.3x the budget a section is cut back
DEFAULT_WORDS = 250


def token_cap(words: int) -> int:
    """The max_tokens that lets an answer of about `words` words end on its own (455 for 250 words)."""
    return math.ceil(round(words * TOKENS_PER_WORD * HEADROOM, 6))


class BookSpec(BaseModel):
    """What the user asked for: the prompt and the outline's shape (parts x chapters x sections). A section's
    max_tokens not given (or None) is token_cap(words)."""

    prompt: str = Field(min_length=1)
    parts: int = Field(default=8, gt=0)
    chapters: int = Field(default=12, gt=0)
    sections: int = Field(default=16, gt=0)
    words: int = Field(default=DEFAULT_WORDS, gt=0)
    max_tokens: int = Field(gt=0)
    section_template: str | None = None  # the user's own section prompt (its text); None: templates/section.md
    profile: SamplingProfile | None = None  # chosen once the engines are known; a resume keeps it
    planner_profile: SamplingProfile | None = None  # when planning has backends of its own
    sources: list[str] = Field(default_factory=list)  # the user's documents, files or folders, as named

    @model_validator(mode="before")
    @classmethod
    def _token_cap(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("max_tokens") is None:
            words = data.get("words", DEFAULT_WORDS)
            return {**data, "max_tokens": token_cap(words) if isinstance(words, int) and words > 0 else None}
        return data

    @property
    def shape(self) -> str:
        return f"{self.parts}x{self.chapters}x{self.sections}"

    @property
    def section_count(self) -> int:
        return self.parts * self.chapters * self.sections


class Node(BaseModel):
    """A planned unit of the outline: its id, its title and its key point."""

    model_config = ConfigDict(serialize_by_alias=True)  # `places` is written as `sources`, its earlier name

    id: str  # p01, p01.c02, p01.c02.s03
    title: str
    point: str = ""  # what it covers, in one line, so its siblings know what to leave to it
    placeholder: bool = False  # a numbered stand-in (outlines of older versions; fanout makes none now)
    about: str = ""  # the facet or concern the plan gave the model to phrase it from ('' : planned open or by hand)
    short: bool = False  # planned with fewer children than the shape asks: no usable line for the rest
    # the places of the user's passages that support it (Passage.place: file, heading path, page); a section is
    # written from those, a person may edit them. Written under their earlier name, `sources` (outline.json keeps
    # its bytes), and read under either
    places: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("places", "sources"), serialization_alias="sources"
    )


class Section(Node):
    pass


class Chapter(Node):
    sections: list[Section] = Field(default_factory=list)


class Part(Node):
    chapters: list[Chapter] = Field(default_factory=list)


def without_empty(outline: Outline) -> int:
    """Take out the chapters planning left with no section and the parts left with no chapter, marking their
    parents short; returns how many were taken out (a reader prefers a chapter fewer to an empty heading)."""
    taken = 0
    for part in outline.parts:
        kept = [chapter for chapter in part.chapters if chapter.sections]
        part.short, taken = part.short or len(kept) < len(part.chapters), taken + len(part.chapters) - len(kept)
        part.chapters = kept
    kept_parts = [part for part in outline.parts if part.chapters]
    outline.short, taken = (
        outline.short or len(kept_parts) < len(outline.parts),
        taken + len(outline.parts) - len(kept_parts),
    )
    outline.parts = kept_parts
    return taken


def wants_children(node: Part | Chapter, count: int) -> bool:
    """The node still lacks children the shape asks for (`count`) and was not planned short."""
    have = len(node.chapters) if isinstance(node, Part) else len(node.sections)
    return not node.short and have < count


class Outline(BaseModel):
    title: str
    parts: list[Part]
    complete: bool = True  # False while planning: an interrupted run plans only what is missing
    short: bool = False  # planned with fewer parts than the shape asks: no usable line for the rest

    def sections(self) -> list[tuple[Part, Chapter, Section]]:
        """Every section with its part and chapter, in outline order."""
        return [(p, c, s) for p in self.parts for c in p.chapters for s in c.sections]


class SectionResult(BaseModel):
    """One written section as journaled. `error` is set (and text empty) when every attempt failed."""

    id: str
    title: str
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    backend: str | None = None
    t_sent: float | None = None
    t_first_token: float | None = None
    t_done: float | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    error: str | None = None
    version: int = 1  # a repair appends version + 1; the journal keeps every version
    repair: str | None = None  # how this version was made: rewritten, continued, retitled
    trimmed: bool = False  # cut back to its last full sentence (it ran to the cap, or looped)
    raw_text: str | None = None  # the answer as the model sent it, when the text differs (trimmed, tidied)
    headings_removed: int = 0  # headings inside the answer, taken out (they would read as sections)
    margin: float | None = None  # on-point margin: cosine to its own title and point minus the nearest sibling's
    subject_fit: float | None = (
        None  # the on-subject judge's score of it (pipeline/meaning/onsubject.py); None: not judged
    )
    candidates: int = 1  # answers written for it (best of k), the kept one chosen by margin
    discarded_tokens: int = 0  # tokens of the candidates not kept
    # the user's source passages its prompt showed, [1] first (`given` in the journal of an earlier version)
    passages: list[Passage] = Field(default_factory=list, validation_alias=AliasChoices("passages", "given"))
    citations_removed: int = 0  # markers [n] the answer wrote that named no passage given, taken out

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.text.strip())


# ---------------------------------------------------------------- the outline's ids

ID_LETTERS = "pcs"  # of a part's, a chapter's and a section's ids: p01, p01.c02, p01.c02.s03


def node_id(*numbers: int) -> str:
    """The id of a node by its place, level by level, numbers from 0: node_id(0, 1, 2) is p01.c02.s03."""
    return ".".join(f"{ID_LETTERS[at]}{number + 1:02d}" for at, number in enumerate(numbers))


def next_id(above: Node | None, taken: Sequence[Node]) -> str:
    """The lowest free id of a child of `above` (None: the book): a resumed chapter may hold journaled sections with
    gaps between them."""
    numbers = [int(piece[1:]) - 1 for piece in above.id.split(".")] if above is not None else []
    used = {node.id for node in taken}
    number = 0
    while node_id(*numbers, number) in used:
        number += 1
    return node_id(*numbers, number)


def id_number(node_id: str) -> int:
    return int(re.sub(r"\D", "", node_id.rsplit(".", 1)[-1]))


def children(node: Outline | Part | Chapter) -> list[Node]:
    """The node's children: the book's parts, a part's chapters, a chapter's sections."""
    return node.parts if isinstance(node, Outline) else node.chapters if isinstance(node, Part) else node.sections  # type: ignore[return-value]
