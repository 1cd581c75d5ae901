"""Citations judged: does each cited sentence say what the passage it cites says?

Takes an AuditBook whose sections carry the passages their markers number (a run's journal: the passages each
section was given; a Markdown book audited with its sources: each section's Sources list found in the index,
`resolve_sources`) and an Embedder; returns, per section, the sentences checked and those unsupported.

A cited sentence (its markers taken out) is supported by passage n when its support (the meaning model's cosine,
plus CITED_OVERLAP times the share of the sentence's stems the passage has) is at least CITED_FLOOR and no other
passage the section was given supports it more by over CITED_MARGIN (pipeline/meaning/floors.py): a sentence a
writer took from one passage is nearest it, one cited to the wrong passage of those given is nearer another.
Calibrated on labelled pairs from the good-writing corpus (examples/citation_support.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.audit.book import AuditBook, AuditSection
from pipeline.meaning.embed import Embedder
from pipeline.meaning.floors import CITED_FLOOR, CITED_MARGIN, CITED_OVERLAP
from pipeline.records.sources import Passage
from pipeline.sources.index import tokens
from pipeline.sources.markers import MARKER, marker_numbers, without_markers
from pipeline.text import sentences, split_code

JUDGED_STEMS = 3  # a cited sentence of fewer content words ('}' left of a code block) is not judged


@dataclass(frozen=True)
class Support:
    score: float  # how well the cited passage supports the sentence: cosine + CITED_OVERLAP x stems shared
    margin: float  # that, less the best other passage given's (1.0 when none other was given)

    @property
    def supported(self) -> bool:
        return self.score >= CITED_FLOOR and self.margin >= -CITED_MARGIN


@dataclass(frozen=True)
class SectionCitations:
    id: str
    checked: int  # citations judged (a sentence citing two passages is two)
    unsupported: list[str]  # 'sentence' [n] for each one not supported


def support(embedder: Embedder, sentence: str, given: list[str], cited: int) -> Support:
    """How well passage `cited` (an index into `given`) supports the sentence, by meaning and by the stems they
    share (a sentence written from a passage keeps its terms)."""
    rows = embedder.embed([sentence, *given])
    stems = set(tokens([sentence])[0])
    shared = np.array([len(stems & set(words)) / max(1, len(stems)) for words in tokens(given)], dtype=np.float32)
    scores = rows[1:] @ rows[0] + CITED_OVERLAP * shared
    others = np.delete(scores, cited)
    score = float(scores[cited])
    return Support(score, score - float(others.max()) if len(others) else 1.0)


def cited_sentences(text: str) -> list[tuple[str, list[int]]]:
    """(sentence without its markers, the numbers it cites) for each prose sentence with a marker; markers standing
    after a sentence's full stop ('… fifteen degrees. [2]') are that sentence's."""
    found: list[tuple[str, list[int]]] = []
    previous = ""
    for sentence in sentences(" ".join(split_code(text)), lines="blank"):  # code left out: its brackets are no markers
        numbers = [n for match in MARKER.finditer(sentence) for n in marker_numbers(match)]
        bare = without_markers(sentence)
        if numbers and (bare or previous):
            found.append((bare or previous, list(dict.fromkeys(numbers))))
        previous = bare or previous
    return found


def section_citations(section: AuditSection, embedder: Embedder) -> SectionCitations:
    given = list(section.passages)
    checked, unsupported = 0, []
    for sentence, numbers in cited_sentences(section.text):
        if len(tokens([sentence])[0]) < JUDGED_STEMS:
            continue
        for number in numbers:
            if not 1 <= number <= len(given) or not given[number - 1]:
                continue  # a marker that names no passage is the writer's count (citations_removed)
            checked += 1
            if not support(embedder, sentence, given, number - 1).supported:
                unsupported.append(f"{sentence[:80]!r} [{number}]")
    return SectionCitations(section.id, checked, unsupported)


def book_citations(book: AuditBook, embedder: Embedder) -> list[SectionCitations]:
    """Every section with passages to judge against, judged."""
    return [section_citations(section, embedder) for section in book.sections if any(section.passages)]


def resolve_sources(book: AuditBook, passages: list[Passage]) -> int:
    """Give each section of a Markdown book the texts its Sources list names (found by where each passage is
    from; "" for an entry no passage matches). Returns the entries not found."""
    by_where = {passage.place(): passage.text for passage in passages}
    missing = 0
    for at, section in enumerate(book.sections):
        if not section.cites_from:
            continue
        texts = tuple(by_where.get(where, "") for where in section.cites_from)
        missing += sum(not text for text in texts)
        book.sections[at] = section.with_passages(texts)
    return missing
