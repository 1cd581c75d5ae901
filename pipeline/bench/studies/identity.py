"""Identity against a single-user oracle: do answers change when the server gets busy?

Takes a pool (one backend, or two for the two-servers mode) and a prompt set; returns an IdentityRecord.
The oracle is each prompt answered alone, one request at a time, at temperature 0. Then, per level N, N
requests at once (prompt i mod the set), each compared with its prompt's oracle: by token ids when the
engine returns logprobs with ids, else by bytes. For every divergence: the first differing index and both
candidates, with their logprobs when given. Modes: `concurrency` (the levels above), `same` (one question
N times at once, compared with its oracle and among themselves), `servers` (the oracle of one fresh server
against another's: for the embedded engine, a restart).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import BaseModel, Field

from pipeline.backends.engines import engine
from pipeline.backends.pool import BackendPool
from pipeline.records import ChatRequest, Completion, Endpoint

DEFAULT_PROMPTS = [
    "Explain in three sentences why the sky is blue.",
    "Write a short Python function that reverses a string, with a docstring.",
    "List five uses of a paperclip.",
    "What is the difference between a list and a tuple in Python?",
    "Describe how a bicycle gear works to a child.",
    "Give three tips for writing clear error messages.",
    "Summarise the water cycle in four steps.",
    "Why do we sleep? Answer in two short paragraphs.",
    "Write a haiku about compilers.",
    "What makes a good unit test? Give four properties.",
    "Explain what an HTTP status code 429 means and how a client should react.",
    "Compare walking and cycling for a five-kilometre commute.",
]
TOP_LOGPROBS = 2


class Candidate(BaseModel):
    token: str
    id: int | None = None
    logprob: float | None = None


class Answer(BaseModel):
    prompt_index: int
    text: str
    tokens: list[Candidate] = Field(default_factory=list)  # the chosen token at each step
    alternatives: list[list[Candidate]] = Field(default_factory=list)  # top candidates at each step


class Divergence(BaseModel):
    prompt_index: int
    request: int
    unit: str  # "token" (ids or token strings from logprobs) or "byte"
    index: int
    oracle: Candidate
    got: Candidate
    oracle_top: list[Candidate] = Field(default_factory=list)
    got_top: list[Candidate] = Field(default_factory=list)


class IdentityLevel(BaseModel):
    users: int
    identical: int
    total: int
    distinct_answers: int
    divergences: list[Divergence] = Field(default_factory=list)


class IdentityRecord(BaseModel):
    mode: str
    backend: str
    engine: str
    model: str | None
    slots: int | None
    max_tokens: int
    prompts: list[str]
    levels: list[IdentityLevel]
    oracle_has_token_ids: bool
    duration_s: float
    provenance: dict[str, Any] = Field(default_factory=dict)


def answer_of(index: int, completion: Completion) -> Answer:
    steps = completion.logprobs or []
    tokens = [Candidate(token=s.get("token", ""), id=s.get("id"), logprob=s.get("logprob")) for s in steps]
    alternatives = [
        [
            Candidate(token=t.get("token", ""), id=t.get("id"), logprob=t.get("logprob"))
            for t in s.get("top_logprobs") or ()
        ]
        for s in steps
    ]
    return Answer(prompt_index=index, text=completion.text, tokens=tokens, alternatives=alternatives)


@dataclass(frozen=True)
class Form:
    """How each question is sent: the endpoint, and whether answers run to their cap (ignore_eos). A text
    completion of a bare question can end at once (SmolLM2 answered "Explain in three sentences why the sky
    is blue." with its end token), so over completions answers run to the cap where the engine has
    ignore_eos (the engine record says)."""

    endpoint: Endpoint = Endpoint.CHAT
    ignore_eos: bool = False


CHAT = Form()


def identity_request(prompt: str, max_tokens: int, tag: str, form: Form = CHAT) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}],
        endpoint=form.endpoint,
        max_tokens=max_tokens,
        temperature=0.0,
        extra={"logprobs": True, "top_logprobs": TOP_LOGPROBS, **({"ignore_eos": True} if form.ignore_eos else {})},
        tag=tag,
    )


def _key(candidate: Candidate) -> object:
    return candidate.id if candidate.id is not None else candidate.token


def first_divergence(oracle: Answer, got: Answer, request: int) -> Divergence | None:
    """Where `got` first leaves the oracle: by token when both have tokens, else by byte."""
    if oracle.tokens and got.tokens:
        for index, (a, b) in enumerate(zip(oracle.tokens, got.tokens)):
            if _key(a) != _key(b):
                return Divergence(
                    prompt_index=oracle.prompt_index,
                    request=request,
                    unit="token",
                    index=index,
                    oracle=a,
                    got=b,
                    oracle_top=_at(oracle.alternatives, index),
                    got_top=_at(got.alternatives, index),
                )
        if len(oracle.tokens) != len(got.tokens):
            index = min(len(oracle.tokens), len(got.tokens))
            end = Candidate(token="<end>")
            return Divergence(
                prompt_index=oracle.prompt_index,
                request=request,
                unit="token",
                index=index,
                oracle=_at(oracle.tokens, index, end),
                got=_at(got.tokens, index, end),
            )
        return None
    sa, sb = oracle.text.encode(), got.text.encode()
    if sa == sb:
        return None
    index = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
    return Divergence(
        prompt_index=oracle.prompt_index,
        request=request,
        unit="byte",
        index=index,
        oracle=Candidate(token=sa[index : index + 16].decode(errors="replace")),
        got=Candidate(token=sb[index : index + 16].decode(errors="replace")),
    )


def _at(items: list, index: int, default=None):
    return items[index] if index < len(items) else ([] if default is None else default)


async def ask_all(
    pool: BackendPool,
    prompts: list[str],
    indices: list[int],
    max_tokens: int,
    users: int | None = None,
    *,
    form: Form = CHAT,
) -> list[Answer]:
    """The requests for `indices`, at most `users` in flight (all at once by default), in request order."""
    answers: list[Answer | None] = [None] * len(indices)
    limiter = anyio.CapacityLimiter(users or len(indices))

    async def one(slot: int, index: int) -> None:
        async with limiter:
            completion = await pool.complete(identity_request(prompts[index], max_tokens, f"id-{slot}", form))
        answers[slot] = answer_of(index, completion)

    async with anyio.create_task_group() as group:
        for slot, index in enumerate(indices):
            group.start_soon(one, slot, index)
    return [answer for answer in answers if answer is not None]  # every slot is filled once the group ends


async def oracle_answers(pool: BackendPool, prompts: list[str], max_tokens: int, *, form: Form = CHAT) -> list[Answer]:
    """The single-user oracle: one request at a time."""
    return await ask_all(pool, prompts, list(range(len(prompts))), max_tokens, users=1, form=form)


def compare_level(users: int, oracle: list[Answer], answers: list[Answer]) -> IdentityLevel:
    divergences = [
        d
        for request, answer in enumerate(answers)
        if (d := first_divergence(oracle[answer.prompt_index], answer, request)) is not None
    ]
    distinct = len({(a.prompt_index, tuple(_key(t) for t in a.tokens) or a.text) for a in answers})
    return IdentityLevel(
        users=users,
        identical=len(answers) - len(divergences),
        total=len(answers),
        distinct_answers=distinct,
        divergences=divergences,
    )


async def compared_levels(
    pool: BackendPool,
    prompts: list[str],
    levels: list[int],
    max_tokens: int,
    oracle: list[Answer],
    *,
    form: Form = CHAT,
    same_question: bool = False,
) -> list[IdentityLevel]:
    """Each level's answers against the oracle. At N users, N requests in flight: every prompt asked (repeated to
    fill N when N is larger), or with `same_question` the first prompt asked N times at once."""
    results = []
    for users in levels:
        indices = [0] * users if same_question else [i % len(prompts) for i in range(max(users, len(prompts)))]
        answers = await ask_all(pool, prompts, indices, max_tokens, users, form=form)
        results.append(compare_level(users, oracle, answers))
    return results


def servers_level(oracle_a: list[Answer], oracle_b: list[Answer]) -> IdentityLevel:
    """Two fresh servers, one user each: B's oracle against A's."""
    return compare_level(1, oracle_a, oracle_b)


def elapsed_since(started: float) -> float:
    return round(time.monotonic() - started, 2)


class IdentitySpec(BaseModel):
    prompts: list[str] = Field(default_factory=lambda: list(DEFAULT_PROMPTS))
    levels: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    max_tokens: int = Field(default=96, gt=0)
    mode: str = "concurrency"  # concurrency | same | servers
    endpoint: Endpoint = Endpoint.CHAT


def single_pool(fleet, index: int) -> BackendPool:
    """A pool over one backend of the fleet, so each oracle comes from one server."""
    state = fleet.pool.states[index]
    return BackendPool([state.backend], fleet.pool.policy, caps=[state.cap])


def check_levels(spec: IdentitySpec, cap: int) -> None:
    from pipeline.errors import UsageError

    if spec.mode not in ("concurrency", "same", "servers"):
        raise UsageError(f"setting 'mode' {spec.mode!r}: expected concurrency, same or servers")
    too_many = [n for n in spec.levels if n > cap]
    if too_many:
        raise UsageError(f"levels {too_many} exceed the backend's cap {cap}: that would measure queueing, not batching")


async def run_identity(settings, spec: IdentitySpec) -> IdentityRecord:
    from pipeline.backends.fleet import open_fleet
    from pipeline.bench.report.provenance import host_info

    started = time.monotonic()
    async with open_fleet(settings) as fleet:
        backend, info = fleet.backends[0], fleet.engines[fleet.backends[0].name]
        check_levels(spec, fleet.pool.states[0].cap)
        pool = single_pool(fleet, 0)
        form = Form(spec.endpoint, ignore_eos=spec.endpoint is Endpoint.COMPLETIONS and engine(info.kind).ignore_eos)
        oracle = await oracle_answers(pool, spec.prompts, spec.max_tokens, form=form)
        if spec.mode in ("concurrency", "same"):
            same = spec.mode == "same"
            levels = await compared_levels(
                pool, spec.prompts, spec.levels, spec.max_tokens, oracle, form=form, same_question=same
            )
        elif len(fleet.backends) > 1:
            other = await oracle_answers(single_pool(fleet, 1), spec.prompts, spec.max_tokens, form=form)
            levels = [servers_level(oracle, other)]
    if spec.mode == "servers" and len(fleet.backends) == 1:
        if fleet.embedded is None:
            from pipeline.errors import UsageError

            raise UsageError(
                "setting 'mode' servers needs two servers in setting 'backends' (or the embedded engine, restarted)"
            )
        async with open_fleet(settings) as second:  # a fresh embedded engine
            other = await oracle_answers(single_pool(second, 0), spec.prompts, spec.max_tokens, form=form)
            levels = [servers_level(oracle, other)]
    return IdentityRecord(
        mode=spec.mode,
        backend=backend.base_url,
        engine=info.kind.value,
        model=backend.model,
        slots=info.slots,
        max_tokens=spec.max_tokens,
        prompts=spec.prompts,
        levels=levels,
        oracle_has_token_ids=all(t.id is not None for a in oracle for t in a.tokens) and any(a.tokens for a in oracle),
        duration_s=elapsed_since(started),
        provenance=host_info().model_dump(),
    )


def identity_markdown(record: IdentityRecord) -> str:
    unit = "token ids" if record.oracle_has_token_ids else "bytes"
    lines = [
        f"# Identity against a single-user oracle ({record.mode})",
        "",
        f"{record.engine} at {record.backend}, model {record.model}, slots {record.slots}, "
        f"{len(record.prompts)} prompts, {record.max_tokens} tokens each, temperature 0; compared by {unit}; "
        f"{record.duration_s:.1f} s.",
        "",
        "| users | identical | distinct answers | first divergences (prompt, index: oracle → got) |",
        "|---|---|---|---|",
    ]
    for level in record.levels:
        shown = "; ".join(divergence_text(d) for d in level.divergences[:4])
        more = f" (+{len(level.divergences) - 4} more)" if len(level.divergences) > 4 else ""
        lines.append(f"| {level.users} | {level.identical}/{level.total} | {level.distinct_answers} | {shown}{more} |")
    return "\n".join(lines) + "\n"


def divergence_text(d: Divergence) -> str:
    def show(c: Candidate) -> str:
        return repr(c.token) + (f" ({c.logprob:.3f})" if c.logprob is not None else "")

    return f"#{d.prompt_index + 1} {d.unit} {d.index}: {show(d.oracle)} → {show(d.got)}"
