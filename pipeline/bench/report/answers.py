"""Whether answers got worse under load: the audit of one bench level's answers (--audit-answers).

Takes a level's requests, each with its answer's text kept; flags each answered request and returns the
level's AnswerAudit. An answer is
- capped: the engine stopped it at its cap (finish_reason "length") and it ends mid-sentence (no closing
  punctuation or closed code fence: the audit's own test, pipeline/text.py `ends_closed`);
- looping: its seq-rep-4 (1 − unique word 4-grams ÷ 4-grams, the audit's repetition figure) is over 0.3;
- empty: no words at all;
- duplicate: word for word (whitespace aside) another answer of the same level to a different prompt.
Failed requests are not answers; the level's failure count says what failed. The flags go on each sample
(and so into the per-request rows); the texts stay in memory and out of the record.
"""

from __future__ import annotations

from collections import defaultdict

from pipeline.audit.quality import REPETITIVE, seq_rep
from pipeline.records.bench import AnswerAudit, RequestSample
from pipeline.text import ends_closed, words_of

RULE = (
    f"capped: finish_reason length and no closing punctuation; looping: seq-rep-4 over {REPETITIVE}; empty: no "
    "words; duplicate: the same words as an answer to another prompt of the level"
)


def answer_flags(sample: RequestSample) -> list[str]:
    text = sample.answer or ""
    words = words_of(text)
    flags = []
    if sample.finish_reason == "length" and not ends_closed(text):
        flags.append("capped")
    if seq_rep(words) > REPETITIVE:
        flags.append("looping")
    if not words:
        flags.append("empty")
    return flags


def audit_answers(requests: list[RequestSample], *, ignore_eos: bool) -> AnswerAudit:
    answered = [r for r in requests if r.error is None and r.answer is not None]
    prompts_by_text: dict[str, set[str | None]] = defaultdict(set)
    for sample in answered:
        sample.answer_flags = answer_flags(sample)
        if "empty" not in sample.answer_flags:
            prompts_by_text[" ".join((sample.answer or "").split())].add(sample.prompt_key)
    for sample in answered:
        if len(prompts_by_text.get(" ".join((sample.answer or "").split()), ())) > 1:
            sample.answer_flags = [*(sample.answer_flags or []), "duplicate"]
    counts = {flag: sum(flag in (r.answer_flags or []) for r in answered) for flag in AnswerAudit.FLAGS}
    total = len(answered)
    shares = {f"{flag}_share": round(count / total, 4) if total else None for flag, count in counts.items()}
    return AnswerAudit.model_validate({"answers": total, **counts, **shares, "ignore_eos": ignore_eos, "rule": RULE})
