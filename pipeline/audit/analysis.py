"""The book's figures by meaning: is each section about its own point, do two titles or two chapters say the
same thing, is a point vague, does a section stray off the book, does the plan carry what the request asks.

Takes an AuditBook (with the outline's key points and the request where the book has them) and an Embedder
(pipeline/meaning/embed.py); returns a BookMeaning: the figures, one line of evidence for each finding, and a
SectionMeaning per section (what the rules and the repair act on). Each judgement is a cosine against a
threshold; every threshold is calibrated on the labelled set in tests/fixtures/meaning/
(`python -m pipeline.bench.studies.calibrate` prints each one's precision and recall there). The planner asks the
same questions of a title or a point before it takes one (`title_near`, `point_vagueness`, `carries`).

Static embeddings reward repeated words: a section that restates its point scores near it whatever else it
says. So `on_point` is also measured with every sentence that repeats the point's content words removed
(`on_point_unrestated`), and the share of sections that open by restating it is a figure of its own.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from pipeline.audit.book import AuditBook, AuditSection, headings_of
from pipeline.audit.citations import book_citations
from pipeline.meaning.embed import Embedder, Vectors, unit_rows
from pipeline.meaning.floors import OFF_REQUEST, SET_APART
from pipeline.meaning.nearness import (
    DIGITS,
    MIN_PARAGRAPH_WORDS,
    OFF_BOOK,
    OVERLAPPING_UNITS,
    REPEATED_PARAGRAPH,
    SIMILAR_TITLE,
    body_text,
    carries,
    distinctive,
    margin_of,
    point_vagueness,
    restating,
    says_the_same,
    subject_words,
    unit,
    unrestated,
)
from pipeline.meaning.offrequest import JUDGED_LEVELS, request_fit
from pipeline.meaning.onsubject import book_fits, subject_fits
from pipeline.meaning.reading import request_asks
from pipeline.records import Author
from pipeline.records.audit import BookMeaning, SectionMeaning
from pipeline.text import paragraphs, sentences, without_code
from pipeline.titles import TitleIndex, content_words, title_key


@dataclass
class Family:
    """A chapter's sections, with what each promises, for the on-point test."""

    chapter_id: str
    chapter_unit: str
    above: list[str] = field(default_factory=list)  # the chapter's unit and the titles of the headings above it
    sections: list[AuditSection] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    points: list[str] = field(default_factory=list)


def families(book: AuditBook) -> list[Family]:
    """The sections grouped by parent (a run's chapters; a Markdown file's enclosing headings), each parent's
    title and point what they share; sections with no parent last, under the book's title."""
    titles = book.titles()
    grouped: dict[str, Family] = {}
    loose = Family("", book.title)
    for section in book.sections:
        parent = book.parents.get(section.id)
        if parent is None:
            family = loose
        else:
            family = grouped.setdefault(parent, family_of(book, parent, titles))
        point = book.points.get(section.id, "")
        family.sections.append(section)
        family.units.append(unit(section.title, point))
        family.points.append(point or section.title)
    return [f for f in [*grouped.values(), loose] if f.sections]


def family_of(book: AuditBook, parent: str, titles: dict[str, str]) -> Family:
    """The family of the sections under `parent`: its unit, and the texts above it: that unit and the titles of the
    headings above it below the book's title (the book is what the request says it is)."""
    chapter = unit(titles.get(parent, ""), book.points.get(parent, ""))
    above, node = [chapter], book.parents.get(parent)
    while node is not None:
        above.append(titles.get(node, ""))
        node = book.parents.get(node)
    return Family(parent, chapter, [text for text in above if text and text != book.title])


def margins(texts: Vectors, units: Vectors) -> tuple[list[float], list[int]]:
    """margin_of for each text against the units, text i's own unit being unit i."""
    found = [margin_of(row, index) for index, row in enumerate(texts @ units.T)]
    return [margin for margin, _ in found], [nearest for _, nearest in found]


def section_meanings(book: AuditBook, embedder: Embedder) -> list[SectionMeaning]:
    request = book.prompt or book.title
    anchor = embedder.embed([request])[0]
    found: list[SectionMeaning] = []
    for family in families(book):
        written = [s.error is None and bool(s.text.strip()) for s in family.sections]
        bodies = [body_text(s.text) for s in family.sections]
        texts = embedder.embed(bodies)
        above = embedder.embed(family.above or [family.chapter_unit])
        units = embedder.embed(family.units)
        plain = embedder.embed([unrestated(b, p) for b, p in zip(bodies, family.points)])
        kept, kept_plain = margins(texts, units), margins(plain, units)
        for index, section in enumerate(family.sections):
            strays = len(headings_of(section.text)) if book.from_journal else 0  # a Markdown unit ends at one
            meaning = SectionMeaning(id=section.id, stray_headings=strays)
            if written[index]:
                meaning.to_book = round(float(texts[index] @ anchor), DIGITS)
                meaning.to_above = round(float((above @ texts[index]).max()), DIGITS)
                # off the book needs a book that says what it is about: a request, or a title heading
                meaning.off_book = bool(request) and max(meaning.to_book, meaning.to_above) < OFF_BOOK
                first = sentences(bodies[index].strip())[0]
                meaning.opens_restating = restating(first, content_words(family.points[index]))
                if len(family.sections) > 1:
                    margin, nearest = kept[0][index], kept[1][index]
                    meaning.margin = round(margin, DIGITS)
                    meaning.on_point = margin > 0
                    meaning.nearest = None if margin > 0 else family.sections[nearest].id
                    meaning.margin_unrestated = round(kept_plain[0][index], DIGITS)
            found.append(meaning)
    return found


# ---------------------------------------------------------------- across the book


def prose_paragraphs(text: str) -> list[str]:
    """The text's paragraphs of prose (MIN_PARAGRAPH_WORDS words or more), fenced code left out."""
    return [b for b in paragraphs(without_code(text)) if len(b.split()) >= MIN_PARAGRAPH_WORDS]


def repeated_paragraphs(book: AuditBook, embedder: Embedder, block: int = 2048) -> dict[str, tuple[str, float]]:
    """Section id -> (the earlier section, cosine) whose paragraph one of its paragraphs nearly repeats."""
    owners, texts = [], []
    for section in book.sections:
        for paragraph in prose_paragraphs(section.text) if section.error is None else []:
            owners.append(section.id)
            texts.append(paragraph)
    if len(texts) < 2:
        return {}
    vectors, owner = embedder.embed(texts), np.asarray(owners)
    found: dict[str, tuple[str, float]] = {}
    for start in range(0, len(texts), block):
        scores = vectors[start : start + block] @ vectors.T
        for row, later in enumerate(range(start, min(start + block, len(texts)))):
            if owners[later] in found:
                continue
            near = np.flatnonzero((scores[row, :later] >= REPEATED_PARAGRAPH) & (owner[:later] != owner[later]))
            same = [i for i in near if says_the_same(float(scores[row, i]), texts[later], texts[i])]
            if same:
                found[owners[later]] = (owners[same[0]], float(scores[row, same[0]]))
    return found


def level_titles(book: AuditBook) -> list[tuple[str, list[tuple[str, str]]]]:
    return book.levels()


def similar_title_pairs(book: AuditBook, embedder: Embedder) -> list[str]:
    """'level id ~ id: title / title (cosine)' for every pair of titles of one level that say the same thing by
    meaning, and every title with the earliest one it nearly repeats by words (found through a TitleIndex, so
    a book of 1,536 sections is not a million comparisons in Python). In a Markdown file, the same title under
    two parents is left to the repeated_title rule; a placeholder, to placeholder_titles."""
    found = []
    subject = subject_words(book.prompt or "")
    for level, items in level_titles(book):
        if len(items) < 2:
            continue
        vectors = embedder.embed([distinctive(title, subject) for _, title in items])
        scores = vectors @ vectors.T
        pairs = {(int(i), int(j)) for i, j in np.argwhere(np.triu(scores >= SIMILAR_TITLE, k=1))}
        index, position = TitleIndex(), dict[str, int]()
        for later, (_, whole) in enumerate(items):
            title = distinctive(whole, subject)
            earlier = index.near(title)
            if earlier is not None:
                pairs.add((position[earlier], later))
            index.add(title)
            position.setdefault(title, later)
        for i, j in sorted(pairs):
            (a_id, a), (b_id, b) = items[i], items[j]
            if a_id in book.placeholders or b_id in book.placeholders:
                continue  # a numbered stand-in is named after its parent: placeholder_titles counts it
            if (
                not book.from_journal
                and title_key(a) == title_key(b)
                and book.parents.get(a_id) != book.parents.get(b_id)
            ):
                continue  # a Markdown file's same entry under two parents: the repeated_title rule counts it
            found.append(f"{level} {a_id} ~ {b_id}: {a!r} / {b!r} ({scores[i, j]:.2f})")
    return found


def vague_point_list(book: AuditBook, embedder: Embedder) -> list[str]:
    found = []
    for _, items in level_titles(book):
        for node_id, title in items:
            why = point_vagueness(embedder, title, book.points.get(node_id, ""))
            if why is not None:
                found.append(f"{node_id} {title!r}: {book.points[node_id]!r} {why}")
    return found


def overlapping(book: AuditBook, embedder: Embedder) -> list[str]:
    """Nodes of one level (chapters, parts; a Markdown file's headings) whose sections' titles and points, pooled,
    cover the same ground as another's; the deepest level with sections under it first."""
    pools: dict[str, list[str]] = {}
    for section in book.sections:
        text, parent = unit(section.title, book.points.get(section.id, "")), book.parents.get(section.id)
        while parent is not None:
            pools.setdefault(parent, []).append(text)
            parent = book.parents.get(parent)
    found = []
    for level, items in reversed(book.levels()):
        groups = [(node_id, title, pools[node_id]) for node_id, title in items if pools.get(node_id)]
        if len(groups) < 2:
            continue
        means = unit_rows(np.stack([embedder.embed(texts).mean(axis=0) for _, _, texts in groups]))
        scores = means @ means.T
        for i, j in zip(*np.triu_indices(len(groups), k=1)):
            if scores[i, j] >= OVERLAPPING_UNITS:
                (a_id, a, _), (b_id, b, _) = groups[i], groups[j]
                found.append(f"{level} {a_id} {a!r} ~ {b_id} {b!r} ({scores[i, j]:.2f})")
    return found


def plan_units(book: AuditBook) -> list[str]:
    """What the plan promises: the book's title, and every part's, chapter's and section's title and point."""
    nodes = [node for _, items in book.levels() for node in items]
    return [book.title, *(unit(title, book.points.get(node_id, "")) for node_id, title in nodes)]


def off_request_nodes(book: AuditBook, judge: Embedder, sections: list[SectionMeaning]) -> dict[str, str]:
    """Each part and chapter off the book's request: its id -> 'title (why)'. A small model's by its title and
    point's fit to the request (pipeline/meaning/offrequest.py); a capable author's when every written section
    under it is off the subject (judge_subject: set apart from the rest of the book), since an author's titles alone
    fit a request as poorly as an off one's: the good-writing corpus's own parts and chapters, on their own two
    requests, 209 of 1,434 under OFF_REQUEST (45 of 568 held out)."""
    if book.author is Author.CAPABLE:
        return set_apart_nodes(book, sections)
    found = {}
    for level, items in book.levels():
        for node_id, title in items if level in JUDGED_LEVELS else []:
            if node_id in book.placeholders:
                continue  # a numbered stand-in says nothing, on or off: placeholder_titles counts it
            fit = request_fit(judge, book.prompt or "", unit(title, book.points.get(node_id, "")))
            if fit < OFF_REQUEST:
                found[node_id] = f"{title} ({fit:.2f} to the request)"
    return found


def set_apart_nodes(book: AuditBook, sections: list[SectionMeaning]) -> dict[str, str]:
    """The parts and chapters of a capable author's book whose every judged section is off the subject."""
    verdicts: dict[str, list[bool]] = {}
    for meaning in sections:
        parent = book.parents.get(meaning.id)
        while parent is not None and meaning.on_subject is not None:
            verdicts.setdefault(parent, []).append(meaning.on_subject)
            parent = book.parents.get(parent)
    titles = book.titles()
    return {
        node_id: f"{titles[node_id]} (its sections are set apart from the rest of the book)"
        for level, items in book.levels()
        for node_id, _ in (items if level in JUDGED_LEVELS else [])
        if verdicts.get(node_id) and not any(verdicts[node_id])
    }


def judge_subject(book: AuditBook, sections: list[SectionMeaning], judge: Embedder) -> None:
    """Each written section's fit to the request and whether it is on the subject, by the judge of its kind of author
    (pipeline/meaning/onsubject.py): a small model's section by its heading's and opening's fit, a capable author's
    by its chapter's distance from the rest of the book and the book's fit to the request."""
    written = {s.id: s for s in book.sections if s.error is None and s.text.strip()}
    judged = [meaning for meaning in sections if meaning.id in written]
    texts = [body_text(written[m.id].text) for m in judged]
    if book.author is Author.CAPABLE:
        chapters = [book.parents.get(m.id, "") for m in judged]
        for meaning, verdict in zip(judged, book_fits(judge, book.prompt or "", chapters, texts)):
            meaning.subject_text, meaning.subject_apart, meaning.on_subject = (
                verdict.text,
                verdict.apart,
                verdict.on_subject,
            )
        return
    units = [unit(written[m.id].title, book.points.get(m.id, "")) for m in judged]
    for meaning, fit in zip(judged, subject_fits(judge, book.prompt or "", units, texts)):
        meaning.subject_unit, meaning.subject_text, meaning.on_subject = fit.unit, fit.text, fit.on_subject


def subject_evidence(meaning: SectionMeaning) -> str:
    """Why a section is off the subject, in the words of its judge (judge_subject)."""
    if meaning.subject_unit is not None:
        return f"{meaning.subject_unit:.2f} heading, {meaning.subject_text:.2f} text to the request"
    if meaning.subject_apart is not None and meaning.subject_apart < SET_APART:
        return f"its chapter is {meaning.subject_apart:.2f} to the book's nearest other chapter"
    return f"{meaning.subject_text:.2f} text to the request, in a book that is not about it"


def coverage(book: AuditBook, embedder: Embedder) -> tuple[list[str], list[str]]:
    """The request's asks, and those neither the book's title nor any part, chapter or section title and point
    carries."""
    asks = request_asks(book.prompt or "")
    units = plan_units(book)
    return asks, [ask for ask in asks if not carries(embedder, ask, units)]


# ---------------------------------------------------------------- the figures


def share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), DIGITS) if flags else None


def judge_citations(book: AuditBook, sections: list[SectionMeaning], embedder: Embedder) -> int | None:
    """Each section's cited sentences against its passages (pipeline/audit/citations.py); the citations judged,
    None when no section has passages to judge by."""
    found = {checked.id: checked for checked in book_citations(book, embedder)}
    for meaning in sections:
        if meaning.id in found:
            meaning.citations, meaning.unsupported = found[meaning.id].checked, found[meaning.id].unsupported
    return sum(checked.checked for checked in found.values()) if found else None


def analyse(book: AuditBook, embedder: Embedder, judge: Embedder | None = None) -> BookMeaning:
    """The figures by meaning; `judge` the off-request judge (pipeline/meaning/offrequest.py), None: not judged."""
    sections = section_meanings(book, embedder)
    judged = [s for s in sections if s.on_point is not None]
    written = {s.id for s in book.sections if s.error is None and s.text.strip()}
    repeats = repeated_paragraphs(book, embedder)
    for meaning in sections:
        if meaning.id in repeats:
            meaning.repeats = repeats[meaning.id][0]
    asks, missing = coverage(book, embedder) if book.prompt else ([], [])
    if judge is not None and book.prompt:
        judge_subject(book, sections, judge)
    off_request = off_request_nodes(book, judge, sections) if judge is not None and book.prompt else None
    subject = [s for s in sections if s.on_subject is not None]
    cited = judge_citations(book, sections, embedder)
    evidence = {
        "similar_titles": similar_title_pairs(book, embedder),
        "vague_points": vague_point_list(book, embedder),
        "overlap": overlapping(book, embedder),
        "off_book": [
            f"{s.id}: {s.to_book:.2f} to the request, {s.to_above:.2f} to the headings above it"
            for s in sections
            if s.off_book
        ],
        "repeated_content": [f"{k}: a paragraph like one of {v[0]} ({v[1]:.2f})" for k, v in repeats.items()],
        "off_point": [f"{s.id}: nearer {s.nearest} by {-(s.margin or 0):.2f}" for s in judged if not s.on_point],
        "missing_asks": missing,
        "off_request": [f"{node_id}: {finding}" for node_id, finding in (off_request or {}).items()],
        "off_subject": [f"{s.id}: {subject_evidence(s)}" for s in subject if not s.on_subject],
        "unsupported": [f"{s.id}: {sentence}" for s in sections for sentence in s.unsupported],
    }
    return BookMeaning(
        model=embedder.name,
        on_point=share([bool(s.on_point) for s in judged]),
        on_point_margin_median=round(statistics.median(s.margin or 0.0 for s in judged), DIGITS) if judged else None,
        on_point_unrestated=share([(s.margin_unrestated or 0) > 0 for s in judged]),
        restating_openings=share([s.opens_restating for s in sections if s.id in written]),
        similar_titles=len(evidence["similar_titles"]),
        off_book=sum(s.off_book for s in sections),
        vague_points=len(evidence["vague_points"]),
        repeated_content=len(repeats),
        stray_headings=sum(s.stray_headings for s in sections) if book.from_journal else None,
        coverage=round(1 - len(missing) / len(asks), DIGITS) if asks else None,
        overlap=len(evidence["overlap"]),
        off_request=None if off_request is None else len(off_request),
        off_request_ids=list(off_request or {}),
        on_subject=share([bool(s.on_subject) for s in subject]) if subject else None,
        off_subject_ids=[s.id for s in subject if not s.on_subject],
        asks=asks,
        missing_asks=missing,
        citations=cited,
        unsupported=None if cited is None else len(evidence["unsupported"]),
        evidence={k: v for k, v in evidence.items() if v},
        sections=sections,
    )
