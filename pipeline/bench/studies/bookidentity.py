"""A book's identity under load: is each section what the same engine writes for one user?

Takes Settings (the fleet the book ran on: its backends by name, or the embedded engine again) and a finished
run folder whose requests.jsonl keeps each answer's text; returns a BookIdentityRecord. Every section request
the run sent (each best-of candidate and off-point retry too) is asked again alone, one at a time, with the
same messages, cap and sampling fields (seed included), on the backend of the same name where the fleet has
one: that is the oracle. Then at each chosen load (`levels`: N requests in flight) every one of them again.
Each set is compared with the oracle, request by request: identical, or the first divergent token (by the
engine's token ids of the two texts where it has /tokenize, else tiktoken's, labelled) and byte. Beside
each set its quality figures (bench/report/answers.py and the audit's seq-rep-4). Identity is claimed only
for greedy requests (temperature 0); a sampled book gets the same figures with the claim withheld, since a
seeded sampler may or may not repeat itself under another batch.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import anyio
from pydantic import BaseModel, Field

from pipeline.audit.quality import seq_rep
from pipeline.backends.fleet import Fleet, open_fleet
from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.bench.load.prompts import TokenCounter, token_counter
from pipeline.bench.load.workload import logged_rows
from pipeline.bench.report.provenance import host_info
from pipeline.book.requestlog import REQUEST_LOG
from pipeline.errors import UsageError
from pipeline.records import ChatRequest
from pipeline.text import ends_closed, words_of

SHOWN_DIVERGENCES = 8


class Asked(BaseModel):
    """One logged section request and its answer as the book got it."""

    tag: str
    backend: str | None
    messages: list[dict[str, str]]
    max_tokens: int
    extra: dict
    text: str
    finish_reason: str | None = None


class SetQuality(BaseModel):
    answers: int
    words_median: float
    seq_rep_4_median: float
    seq_rep_4_max: float
    unfinished_share: float  # no closing punctuation or closed fence at the end
    capped_share: float  # stopped at the cap (finish_reason length)
    failed: int = 0


class Divergence(BaseModel):
    tag: str
    token_index: int | None  # the first differing token (None: no tokenizer)
    byte_index: int
    oracle: str  # the oracle's text from there (a few words)
    got: str


class IdentitySet(BaseModel):
    label: str  # "the book's own load", "16 in flight"
    in_flight: int | None
    identical: int
    compared: int
    peak_in_flight: int | None = None  # the most requests this client had out at once (None: the book's own)
    quality: SetQuality
    divergences: list[Divergence] = Field(default_factory=list)  # the first SHOWN_DIVERGENCES
    divergent_tokens_median: float | None = None  # where divergent answers part from the oracle, median


class BookIdentityRecord(BaseModel):
    run: str
    requests: int
    backends: list[str]
    engine: str
    model: str | None
    greedy: bool
    identity_claimed: bool
    tokenizer: str
    oracle: SetQuality
    sets: list[IdentitySet]
    duration_s: float
    rule: str = (
        "oracle: each section request asked again alone, one at a time, same messages, cap and sampling fields; "
        "identical: the same text byte for byte; first divergence by token ids of the two texts"
    )
    provenance: dict = Field(default_factory=dict)


def load_asked(run: Path) -> list[Asked]:
    path = run / REQUEST_LOG
    if not path.is_file():
        raise UsageError(f"setting 'book' {run}: no {REQUEST_LOG} in it (not a book run folder)")
    asked = []
    for row in logged_rows(path, setting="book"):
        if row.get("kind") != "section" or row.get("outcome") != "ok":
            continue
        if not isinstance(row.get("text"), str):
            raise UsageError(
                f"setting 'book' {path}: its answers' texts are not in the log (a run from before they were kept)"
            )
        asked.append(Asked.model_validate(row))
    if not asked:
        raise UsageError(f"setting 'book' {path}: no answered section requests in it")
    return asked


def request_of(asked: Asked) -> ChatRequest:
    extra = dict(asked.extra)
    temperature = float(extra.pop("temperature", 0.0))
    return ChatRequest(
        messages=asked.messages, max_tokens=asked.max_tokens, temperature=temperature, extra=extra, tag=asked.tag
    )


def quality_of(texts: list[str], finishes: list[str | None], failed: int = 0) -> SetQuality:
    reps = [seq_rep(words_of(t)) for t in texts]
    return SetQuality(
        answers=len(texts),
        words_median=statistics.median(len(words_of(t)) for t in texts) if texts else 0.0,
        seq_rep_4_median=round(statistics.median(reps), 4) if reps else 0.0,
        seq_rep_4_max=round(max(reps, default=0.0), 4),
        unfinished_share=round(sum(not ends_closed(t) for t in texts) / len(texts), 4) if texts else 0.0,
        capped_share=round(sum(f == "length" for f in finishes) / len(finishes), 4) if finishes else 0.0,
        failed=failed,
    )


def pools_by_name(fleet: Fleet) -> dict[str, BackendPool]:
    return {
        state.backend.name: BackendPool([state.backend], fleet.pool.policy, caps=[state.cap])
        for state in fleet.pool.states
    }


Answers = list[tuple[str, str | None] | None]  # (text, finish_reason) a request; None where it failed


async def ask_set(pools: dict[str, BackendPool], asked: list[Asked], in_flight: int) -> tuple[Answers, int]:
    """Every request, at most `in_flight` at once; the answers and the most that were out at once."""
    answers: Answers = [None] * len(asked)
    limiter = anyio.CapacityLimiter(in_flight)
    first = next(iter(pools.values()))
    out = peak = 0

    async def one(index: int) -> None:
        nonlocal out, peak
        pool = pools.get(asked[index].backend or "", first)
        async with limiter:
            out += 1
            peak = max(peak, out)
            try:
                completion = await pool.complete(request_of(asked[index]))
            except RequestFailed:
                return
            finally:
                out -= 1
        answers[index] = (completion.text, completion.finish_reason)

    async with anyio.create_task_group() as group:
        for index in range(len(asked)):
            group.start_soon(one, index)
    return answers, peak


async def first_divergence(counter: TokenCounter, tag: str, oracle: str, got: str) -> Divergence:
    raw_a, raw_b = oracle.encode(), got.encode()
    byte = next((i for i, (x, y) in enumerate(zip(raw_a, raw_b)) if x != y), min(len(raw_a), len(raw_b)))
    ids_a, ids_b = await counter.ids(oracle), await counter.ids(got)
    token = None
    if ids_a is not None and ids_b is not None:
        token = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y), min(len(ids_a), len(ids_b)))
    cut = raw_a[:byte].decode(errors="ignore")
    return Divergence(
        tag=tag,
        token_index=token,
        byte_index=byte,
        oracle=" ".join(oracle[len(cut) :].split()[:6]),
        got=" ".join(got[len(cut) :].split()[:6]),
    )


async def compare(
    counter: TokenCounter,
    label: str,
    in_flight: int | None,
    asked: list[Asked],
    oracle: Answers,
    got: Answers,
    peak: int | None = None,
) -> IdentitySet:
    pairs = [(a, o, g) for a, o, g in zip(asked, oracle, got) if o is not None and g is not None]
    differing = [(a, o, g) for a, o, g in pairs if o[0] != g[0]]
    divergences = [await first_divergence(counter, a.tag, o[0], g[0]) for a, o, g in differing]
    tokens = [d.token_index for d in divergences if d.token_index is not None]
    answered = [g for g in got if g is not None]
    return IdentitySet(
        label=label,
        in_flight=in_flight,
        identical=len(pairs) - len(differing),
        compared=len(pairs),
        peak_in_flight=peak,
        quality=quality_of([t for t, _ in answered], [f for _, f in answered], failed=len(got) - len(answered)),
        divergences=divergences[:SHOWN_DIVERGENCES],
        divergent_tokens_median=statistics.median(tokens) if tokens else None,
    )


async def run_book_identity(settings, run: Path, levels: list[int]) -> BookIdentityRecord:
    asked = load_asked(run)
    started = time.monotonic()
    async with open_fleet(settings) as fleet:
        pools = pools_by_name(fleet)
        top = min(state.cap for state in fleet.pool.states) * len(fleet.pool.states)
        if levels and max(levels) > top:
            raise UsageError(f"setting 'levels' {max(levels)}: more than the fleet's caps allow at once ({top})")
        counter = await token_counter(fleet.session, fleet.backends[0])
        oracle, _ = await ask_set(pools, asked, 1)
        book: Answers = [(a.text, a.finish_reason) for a in asked]
        sets = [await compare(counter, "the book's own load", None, asked, oracle, book)]
        for level in levels:
            got, peak = await ask_set(pools, asked, level)
            sets.append(await compare(counter, f"{level} in flight", level, asked, oracle, got, peak))
        info = fleet.engines[fleet.backends[0].name]
        model = fleet.backends[0].model
        names = [b.name for b in fleet.backends]
    answered = [o for o in oracle if o is not None]
    greedy = all(float(a.extra.get("temperature", 0.0)) == 0.0 for a in asked)
    return BookIdentityRecord(
        run=str(run),
        requests=len(asked),
        backends=names,
        engine=info.kind.value,
        model=model,
        greedy=greedy,
        identity_claimed=greedy,
        tokenizer=counter.name,
        oracle=quality_of([t for t, _ in answered], [f for _, f in answered], failed=len(oracle) - len(answered)),
        sets=sets,
        duration_s=round(time.monotonic() - started, 2),
        provenance=host_info().model_dump(),
    )


def book_identity_markdown(record: BookIdentityRecord) -> str:
    claim = (
        "greedy requests: identity is a fair question"
        if record.identity_claimed
        else "SAMPLED requests (temperature > 0): the counts are shown, identity is not claimed"
    )
    lines = [
        f"# A book's identity under load: {record.run}",
        "",
        f"{record.requests} section requests, {record.engine} ({record.model}) on {', '.join(record.backends)}; "
        f"{claim}; first divergences by {record.tokenizer}; {record.duration_s:.0f} s.",
        "",
        "| answers | identical to the oracle | first divergent token (median) | peak in flight | words (median) | "
        "seq-rep-4 median / max | unfinished | capped | failed |",
        "|---|---|---|---|---|---|---|---|---|",
        quality_row("oracle (alone, one at a time)", "–", None, 1, record.oracle),
    ]
    for one in record.sets:
        identical = f"{one.identical}/{one.compared}"
        lines.append(quality_row(one.label, identical, one.divergent_tokens_median, one.peak_in_flight, one.quality))
    lines += ["", f"Rule: {record.rule}.", ""]
    for one in record.sets:
        for d in one.divergences:
            lines.append(
                f"- {one.label}, {d.tag}: token {d.token_index if d.token_index is not None else '?'} "
                f"(byte {d.byte_index}): oracle “{d.oracle}” → “{d.got}”"
            )
    return "\n".join(lines) + "\n"


def quality_row(label: str, identical: str, first: float | None, peak: int | None, q: SetQuality) -> str:
    return (
        f"| {label} | {identical} | {'–' if first is None else f'{first:g}'} | {peak or '–'} | {q.words_median:g} | "
        f"{q.seq_rep_4_median:.3f} / {q.seq_rep_4_max:.3f} | {q.unfinished_share:.0%} | {q.capped_share:.0%} | "
        f"{q.failed} |"
    )
