"""Real books with defects planted in them: the audit's test set. A clean book of the good-writing corpus
(pipeline/bench/studies/corpus.py) must not be flagged; each defect planted in a copy of it must be caught by a rule
of its kind.

Takes a corpus Book, a donor Book on another subject and the planted sentences (tests/fixtures/audit/
offensive_context.json); gives a Planted: the copy, with one defect of each Kind in a section of its own (each in
another chapter where the book has enough), and where each is. The places are chosen by a generator seeded with the
book's slug, so every run plants the same. `run_folder` writes a book (clean or planted) as the run folder a capable
author's `fanout book` would have left: spec.json, outline.json, the journal and book.md, a section cut off marked
as cut at the token cap; `book_markdown` (corpus.py) writes it as a Markdown book.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pipeline.bench.studies.corpus import Book, CorpusSection, book_outline, book_shape
from pipeline.book.assemble import assemble_book
from pipeline.book.folder import RunFolder, save_outline
from pipeline.book.profiles import PROFILES
from pipeline.files import write_atomic
from pipeline.journal import Journal
from pipeline.records import BookSpec, SectionResult
from pipeline.text import FENCE, prose_lines, prose_sentences

SENTENCES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "audit" / "offensive_context.json"
SAID_AGAIN = 5  # a sentence said this many times more at a section's end
SAME_SUBJECT = ({"the-rust-programming-language", "rust-by-example", "the-cargo-book"}, {"learn-react", "vue-guide"})
# A line no cut or planted sentence goes in: one that opens on a list's, table's, quote's or heading's mark, or is
# indented as code; wider than text.py's list_item (no space needed after the mark: '*Note*', '1.5 cups')
MARKUP_LINE = re.compile(r"\s*(?:[-*+|>#]|\d+[.)]|    )")


class Kind(StrEnum):
    """A defect planted in a copy of a real book."""

    CUT = "cut"  # the section's text stops mid-sentence (a run: at the token cap)
    COPIED = "copied"  # its text is another chapter's section's
    EMPTIED = "emptied"  # it has no text
    REPEATED = "repeated"  # one of its sentences said over and over at its end
    OBSCENITY = "obscenity"  # an obscenity thrown at the reader, in a sentence of its own
    SLUR = "slur"  # a slur used as an insult, likewise
    OPEN_FENCE = "open_fence"  # a code fence opened before its last paragraph and never closed
    FOREIGN = "foreign"  # a whole chapter of a book on another subject, put into a part


# The rules whose findings catch each kind (pipeline/audit/rules.py): a defect of the kind is caught when one of
# them flags its section (for a copy: either of the two sections, naming the other).
CAUGHT_BY: dict[Kind, frozenset[str]] = {
    Kind.CUT: frozenset({"truncated"}),
    Kind.COPIED: frozenset({"repeated_section", "repeated_passages", "repeated_content"}),
    Kind.EMPTIED: frozenset({"empty"}),
    Kind.REPEATED: frozenset({"repetition_loop"}),
    Kind.OBSCENITY: frozenset({"offensive"}),
    Kind.SLUR: frozenset({"offensive"}),
    Kind.OPEN_FENCE: frozenset({"unclosed_fence"}),
    Kind.FOREIGN: frozenset({"off_subject"}),
}

Place = tuple[int, int, int]  # part, chapter, section (0-based) in the planted copy


@dataclass
class Planted:
    """A copy of a book with defects planted in it, and where: each kind's places (a foreign chapter: each of its
    sections); for a copied section, the section its text came from."""

    book: Book
    places: dict[Kind, list[Place]] = field(default_factory=dict)
    copied_from: Place | None = None
    donor: str = ""  # the slug of the book the foreign chapter came from


def planted_sentences(*, held_out: bool, path: Path = SENTENCES) -> dict[str, list[str]]:
    """The obscenities and slurs to plant: the held-out half for a held-out book, the tuned half for the others."""
    planted = json.loads(path.read_text(encoding="utf-8"))["planted"]
    chosen: dict[str, list[str]] = planted["held_out" if held_out else "tuned"]
    return chosen


def donor_for(book: Book, books: list[Book]) -> Book:
    """The book a foreign chapter comes from: the next book of the corpus (by slug) on another subject."""
    others = [b for b in books if b.slug != book.slug and not same_subject(book.slug, b.slug)]
    after = [b for b in others if b.slug > book.slug]
    return (after or others)[0]


def same_subject(a: str, b: str) -> bool:
    return any(a in group and b in group for group in SAME_SUBJECT)


def plant(book: Book, donor: Book, sentences: dict[str, list[str]]) -> Planted:
    """A copy of `book` with one defect of each kind planted (see the module's docstring)."""
    rng = random.Random(book.slug)
    copy = book.model_copy(deep=True)
    planted = Planted(copy, donor=donor.slug)
    part = rng.randrange(len(copy.parts))
    chapters = [chapter for donor_part in donor.parts for chapter in donor_part.chapters]
    foreign = rng.choice([c for c in chapters if len(c.sections) > 1] or chapters).model_copy(deep=True)
    at = rng.randrange(len(copy.parts[part].chapters) + 1)
    copy.parts[part].chapters.insert(at, foreign)
    planted.places[Kind.FOREIGN] = [(part, at, s) for s in range(len(foreign.sections))]
    taken: set[Place] = set(planted.places[Kind.FOREIGN])
    last = last_place(copy)
    taken.add(last)
    for kind in (Kind.CUT, Kind.COPIED, Kind.EMPTIED, Kind.REPEATED, Kind.OBSCENITY, Kind.SLUR):
        where = choose(copy, rng, taken, kind)
        if where is None:
            continue
        taken.add(where)
        planted.places[kind] = [where]
        plant_one(planted, kind, where, rng, sentences)
    if fence_at_end(section_at(copy, last)):
        planted.places[Kind.OPEN_FENCE] = [last]
    return planted


def last_place(book: Book) -> Place:
    part = len(book.parts) - 1
    chapter = len(book.parts[part].chapters) - 1
    return part, chapter, len(book.parts[part].chapters[chapter].sections) - 1


def section_at(book: Book, place: Place) -> CorpusSection:
    part, chapter, section = place
    return book.parts[part].chapters[chapter].sections[section]


def places_of(book: Book) -> list[Place]:
    return [
        (p, c, s)
        for p, part in enumerate(book.parts)
        for c, chapter in enumerate(part.chapters)
        for s in range(len(chapter.sections))
    ]


def choose(book: Book, rng: random.Random, taken: set[Place], kind: Kind) -> Place | None:
    """A section for this kind: one it can be planted in, in a chapter no other plant took where the book allows."""
    chapters = {place[:2] for place in taken}
    fits = [place for place in places_of(book) if place not in taken and can_plant(section_at(book, place), kind)]
    apart = [place for place in fits if place[:2] not in chapters]
    pool = apart or fits
    return rng.choice(pool) if pool else None


def can_plant(section: CorpusSection, kind: Kind) -> bool:
    if kind is Kind.CUT:
        return cut_text(section.text, random.Random(0)) is not None
    if kind in (Kind.REPEATED, Kind.OBSCENITY, Kind.SLUR):
        return bool(prose_sentences(section.text))
    return len(section.text.split()) >= 20


def plant_one(planted: Planted, kind: Kind, where: Place, rng: random.Random, sentences: dict[str, list[str]]) -> None:
    section = section_at(planted.book, where)
    if kind is Kind.CUT:
        section.text = cut_text(section.text, rng) or section.text
    elif kind is Kind.COPIED:
        sources = [p for p in places_of(planted.book) if p[:2] != where[:2] and p not in planted.places[Kind.FOREIGN]]
        sources = [p for p in sources if len(section_at(planted.book, p).text.split()) >= 40] or sources
        planted.copied_from = rng.choice(sources)
        section.text = section_at(planted.book, planted.copied_from).text
    elif kind is Kind.EMPTIED:
        section.text = ""
    elif kind is Kind.REPEATED:
        sentence = rng.choice(prose_sentences(section.text))
        text = section.text.rstrip()
        ends_in_prose = len(text.split("\n")) - 1 in prose_line_numbers(text) and not FENCE.match(text.split("\n")[-1])
        section.text = text + (" " if ends_in_prose else "\n\n") + " ".join([sentence] * SAID_AGAIN)
    else:
        section.text = with_sentence(section.text, rng.choice(sentences[kind.value]))


def cut_text(text: str, rng: random.Random) -> str | None:
    """The text cut mid-sentence: in a line of prose (not code, a list item, a table row or a quote) in its second
    half, after a word of letters that ends no sentence and before another word of that line; None when it has no
    such place."""
    lines = text.split("\n")
    prose = prose_line_numbers(text)
    candidates = []
    for index, line in enumerate(lines):
        if index < len(lines) // 2 or index not in prose or MARKUP_LINE.match(line):
            continue
        words = line.split(" ")
        candidates += [(index, n) for n in range(3, len(words) - 1) if re.fullmatch(r"[A-Za-z]+", words[n - 1])]
    if not candidates:
        return None
    index, n = rng.choice(candidates)
    return "\n".join(lines[:index] + [" ".join(lines[index].split(" ")[:n])])


def prose_line_numbers(text: str) -> set[int]:
    """The numbers of the text's lines outside fenced code (pipeline/text.py's prose_lines)."""
    starts = {offset for offset, _ in prose_lines(text)}
    numbers, offset = set(), 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if offset in starts:
            numbers.add(number)
        offset += len(line)
    return numbers


def fence_at_end(section: CorpusSection) -> bool:
    """A code fence left open at the section's end: a closing fence at its end taken away, else a fence opened before
    its last paragraph. Its end reads as code, and in a Markdown book so does all that follows (which is why it is
    the book's last section)."""
    lines = section.text.rstrip().split("\n")
    if FENCE.match(lines[-1]) and len(lines) - 1 not in prose_line_numbers(section.text.rstrip()):
        section.text = "\n".join(lines[:-1])
        return True
    paragraphs = section.text.rstrip().split("\n\n")
    if len(paragraphs) < 2 or any(FENCE.match(line) for line in paragraphs[-1].split("\n")):
        return False
    section.text = "\n\n".join(paragraphs[:-1] + ["```\n" + paragraphs[-1]])
    return True


def with_sentence(text: str, said: str) -> str:
    """The text with `said` after the first sentence of its first line of prose."""
    lines = text.split("\n")
    for number in sorted(prose_line_numbers(text)):
        found = prose_sentences(lines[number])
        if found and not MARKUP_LINE.match(lines[number]):
            lines[number] = lines[number].replace(found[0], f"{found[0]} {said}", 1)
            return "\n".join(lines)
    return text.rstrip() + "\n\n" + said


# ---------------------------------------------------------------- as a run folder


def run_folder(book: Book, request: str, folder: Path, *, capped: frozenset[Place] = frozenset()) -> Path:
    """The book as the run folder a capable author's `fanout book` leaves (spec.json with the `default` sampling
    profile, outline.json and outline.md, sections.jsonl, book.md); each section of `capped` ended at the token cap."""
    run = RunFolder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    parts, chapters, sections = (int(n) for n in book_shape(book).split("x"))
    shape = {"parts": parts, "chapters": chapters, "sections": sections}
    spec = BookSpec.model_validate({"prompt": request, **shape, "profile": PROFILES["default"]})
    write_atomic(run.spec, spec.model_dump_json(indent=2))
    outline = book_outline(book)
    save_outline(run, outline, request)
    results = {}
    for place, (_, _, node) in zip(places_of(book), outline.sections()):
        text = section_at(book, place).text
        reason = "length" if place in capped else "stop"
        results[node.id] = SectionResult(id=node.id, title=node.title, text=text, finish_reason=reason)
    run.journal.unlink(missing_ok=True)
    journal = Journal(run.journal)
    try:
        for result in results.values():
            journal.append(result)
    finally:
        journal.close()
    assemble_book(run.book, outline, results)
    return folder
