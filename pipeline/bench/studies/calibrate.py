"""The meaning thresholds against a labelled set: precision and recall of each judgement the audit and the
planner make by meaning, and the sweep that chose its threshold.

Takes the folder of labelled sets (the repository's tests/fixtures/meaning: titles, points, sections,
paragraphs, asks, worked-example copies, chapters, requests, requests with their details marked; each file says
where its items came from) and an
Embedder;
returns a Calibration: for each judgement the threshold pipeline/meaning/nearness.py holds, its precision and
recall on the set, and what the best threshold on the set would be (highest F1, ties to the higher
precision). What is judged is here; how a judgement is scored, judging.py. `python -m
pipeline.bench.studies.calibrate [DIR]` prints the table; tests/unit/audit/test_meaning.py holds the figures to
a floor, so a changed threshold or model that does worse on the set fails.

The request reader (pipeline/meaning/reading.py) is measured the same way, by rules, with no model: on requests of
many shapes with their asks marked by hand (requests.json, the set its rules were written from, and
requests_held_out.json, written after them), an ask it reads is right when it is one of the marked asks or
a piece of one (its content words, stemmed, within the marked ask's, or the other way round, or a Jaccard of
0.5 or more): precision is the share of its asks that are right, recall the share of marked asks it found.
Its reading as a person reads a request (reading.read: the subject as the request frames it, the audience, the
concerns) is measured on readings.json (the set its rules were written from) and readings_held_out.json (written
by someone else after them, not used to set them): the subject is read right when its key words (content words
less the words that frame a request, stemmed; a stem that begins another counts as it: 'operator' and 'operating')
are those of the marked subject or of one of the phrasings marked as also right; audience and concerns are scored
as asks are.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.bench.studies.corpus import DEFAULT_DIR as CORPUS_DIR
from pipeline.bench.studies.corpus import Book, load_corpus
from pipeline.bench.studies.judging import Calibration, Case, Judgement, judgement, load, table
from pipeline.bench.studies.planted import donor_for
from pipeline.meaning import nearness as meaning
from pipeline.meaning.asks import DETERMINERS, FRAME_WORDS, PREPOSITIONS
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.floors import BOOK_FLOOR, OFF_REQUEST, ON_SUBJECT, SET_APART
from pipeline.meaning.nearness import STOCK_POINTS, body_text, carries, margin_of, unit
from pipeline.meaning.offrequest import open_judge, request_fit
from pipeline.meaning.onsubject import book_fits, subject_fits
from pipeline.meaning.reading import read, read_request
from pipeline.titles import content_words, near_duplicates

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "meaning"  # repository root


def cosine(embedder: Embedder, a: str, b: str) -> float:
    vectors = embedder.embed([a, b])
    return float(vectors[0] @ vectors[1])


def title_cases(embedder: Embedder, folder: Path) -> list[Case]:
    cases = []
    for a, b, same in load(folder, "titles")["pairs"]:
        score = cosine(embedder, a, b)
        judged = score >= meaning.SIMILAR_TITLE or near_duplicates(a, b)
        cases.append((f"{a} / {b} ({score:.2f})", same, judged, score))
    return cases


def pair_cases(embedder: Embedder, folder: Path, name: str, threshold: float) -> list[Case]:
    """Labelled pairs judged the same when their cosine reaches the threshold."""
    cases = []
    for a, b, same in load(folder, name)["pairs"]:
        score = cosine(embedder, a, b)
        cases.append((f"{a[:40]}… / {b[:40]}… ({score:.2f})", same, score >= threshold, score))
    return cases


def unit_cases(embedder: Embedder, folder: Path) -> list[Case]:
    return pair_cases(embedder, folder, "units", meaning.SIMILAR_UNIT)


def point_cases(embedder: Embedder, folder: Path) -> list[Case]:
    cases = []
    for item in load(folder, "points")["points"]:
        vectors = embedder.embed([item["point"], *STOCK_POINTS])
        score = float((vectors[1:] @ vectors[0]).max())
        judged = meaning.point_vagueness(embedder, item["title"], item["point"]) is not None
        cases.append((f"{item['title']}: {item['point']} ({score:.2f})", item["vague"], judged, score))
    return cases


def section_cases(embedder: Embedder, folder: Path) -> list[Case]:
    cases = []
    for item in load(folder, "sections")["sections"]:
        text = body_text(item["text"])
        nearest = max(cosine(embedder, text, item["request"]), cosine(embedder, text, item["chapter"]))
        cases.append(
            (
                f"{item['chapter']}: {item['text'][:50]}… ({nearest:.2f})",
                item["off"],
                nearest < meaning.OFF_BOOK,
                -nearest,
            )
        )
    return cases


def paragraph_cases(embedder: Embedder, folder: Path) -> list[Case]:
    """Labelled paragraph pairs judged as the audit judges them (nearness.says_the_same); scored by cosine."""
    cases = []
    for a, b, same in load(folder, "paragraphs")["pairs"]:
        score = cosine(embedder, a, b)
        cases.append((f"{a[:40]}… / {b[:40]}… ({score:.2f})", same, meaning.says_the_same(score, a, b), score))
    return cases


def ask_cases(embedder: Embedder, folder: Path) -> list[Case]:
    cases = []
    for ask, text, carried in load(folder, "asks")["pairs"]:
        score = cosine(embedder, ask, text)
        cases.append((f"{ask} in {text[:50]} ({score:.2f})", carried, carries(embedder, ask, [text]), score))
    return cases


def example_cases(embedder: Embedder, folder: Path) -> list[Case]:
    from pipeline.book.plan.prompts import example_units

    examples = example_units()
    cases = []
    for text, copied in load(folder, "examples")["units"]:
        score = float((embedder.embed(examples) @ embedder.embed([text])[0]).max())
        judged = meaning.nearest_example(embedder, text, examples) is not None
        cases.append((f"{text[:60]} ({score:.2f})", copied, judged, score))
    return cases


def chapter_cases(embedder: Embedder, folder: Path) -> list[Case]:
    cases = []
    for a, b, same in load(folder, "chapters")["pairs"]:
        means = [embedder.embed(units).mean(axis=0) for units in (a, b)]
        score = float(means[0] @ means[1] / (np.linalg.norm(means[0]) * np.linalg.norm(means[1])))
        cases.append((f"{a[0][:30]}… / {b[0][:30]}… ({score:.2f})", same, score >= meaning.OVERLAPPING_UNITS, score))
    return cases


def off_request_cases(judge: Embedder, folder: Path) -> list[Case]:
    """Parts' and chapters' titles and points under a request, judged off it or not (pipeline/meaning/offrequest.py)."""
    cases = []
    for entry in load(folder, "off_request")["requests"]:
        for title, point, on in entry["units"]:
            fit = request_fit(judge, entry["request"], unit(title, point))
            cases.append((f"{title} | {entry['request'][:40]} ({fit:.2f})", not on, fit < OFF_REQUEST, -fit))
    return cases


SUBJECT_SETS = (
    ("off_subject", "on_subject"),
    ("off_subject, held out", "on_subject_held_out"),
    ("off_subject, request forms", "on_subject_forms"),
    ("off_subject, request forms, written after", "on_subject_forms_held_out"),
)


def subject_cases(judge: Embedder, folder: Path, set_name: str) -> list[Case]:
    """Sections of real books labelled by reading them, judged off the subject or not
    (pipeline/meaning/onsubject.py): the flag is the positive, as the audit's off_subject rule raises it."""
    cases = []
    for book in load(folder, set_name)["books"]:
        sections = book["sections"]
        units = [unit(s["title"], s["point"]) for s in sections]
        fits = subject_fits(judge, book["request"], units, [s["text"] for s in sections])
        for section, fit in zip(sections, fits):
            what = f"{section['title']} | {book['request'][:40]} ({fit.unit:.2f}, {fit.text:.2f})"
            cases.append((what, not section["on_subject"], not fit.on_subject, -fit.score))
    return cases


def planted_subject_cases(judge: Embedder, books: list[Book]) -> list[Case]:
    """The good-writing corpus judged on the subject as a capable author's book is (pipeline/meaning/onsubject.py's
    book_fits): each book's sections on the book's own two requests, labelled on; and a chapter of the book
    planted.donor_for gives (another subject) put into it, its sections labelled off (the flag, off the subject, is
    the positive; the score is minus the chapter's cosine to the book's nearest other chapter)."""
    cases, corpus = [], load_corpus()
    for book in books:
        donor = donor_for(book, corpus)
        foreign = next(c for p in donor.parts for c in p.chapters if len(c.sections) > 1)
        chapters = [
            (f"{p}.{c}", chapter) for p, part in enumerate(book.parts) for c, chapter in enumerate(part.chapters)
        ]
        chapters.append(("planted", foreign))
        sections = [(name, section) for name, chapter in chapters for section in chapter.sections]
        texts = [body_text(section.text) for _, section in sections]
        for request in (book.requests.topics, book.requests.plain):
            verdicts = book_fits(judge, request, [name for name, _ in sections], texts)
            for (name, section), verdict in zip(sections, verdicts):
                what = f"{section.title} | {book.slug}: {request[:30]} ({verdict.apart})"
                cases.append((what, name == "planted", not verdict.on_subject, -(verdict.apart or 0.0)))
    return cases


def moved_point_cases(embedder: Embedder, books: list[Book]) -> list[Case]:
    """The good-writing corpus judged on its point as the audit judges a Markdown file's section (its text against
    its own title and its siblings'): each section of a chapter of two or more with its own text, labelled on
    point; and with its next sibling's text moved under its heading, labelled off (the positive)."""
    cases = []
    for book in books:
        for chapter in (c for part in book.parts for c in part.chapters if len(c.sections) > 1):
            texts = embedder.embed([body_text(s.text) for s in chapter.sections])
            scores = texts @ embedder.embed([s.title for s in chapter.sections]).T
            for own, section in enumerate(chapter.sections):
                for text, off in ((own, False), ((own + 1) % len(chapter.sections), True)):
                    margin = margin_of(scores[text], own)[0]
                    cases.append((f"{section.title} | {book.slug} ({margin:.2f})", off, margin <= 0, -margin))
    return cases


def good_writing_judgements(corpus: Path = CORPUS_DIR, embedder: Embedder | None = None) -> list[Judgement]:
    """on_subject and off_point on the good-writing corpus, the tuned books and the held-out ones apart
    (`--good-writing`)."""
    books = load_corpus(corpus)
    halves = (("", [b for b in books if not b.held_out]), (", held out", [b for b in books if b.held_out]))
    static = embedder or open_embedder()
    found = [
        judgement(
            f"off_point, good writing{name}", "margin ≤ 0 (score: minus the margin)", moved_point_cases(static, chosen)
        )
        for name, chosen in halves
    ]
    judge = open_judge()
    if judge is None:
        return found
    subject = f"SET_APART {SET_APART}, BOOK_FLOOR {BOOK_FLOOR} (score: minus the chapter's nearness to another)"
    return found + [
        judgement(f"off_subject, good writing{name}", subject, planted_subject_cases(judge, chosen))
        for name, chosen in halves
    ]


JUDGEMENTS: list[tuple[str, str, Callable[[Embedder, Path], list[Case]]]] = [
    ("similar_titles", f"SIMILAR_TITLE {meaning.SIMILAR_TITLE} or shared words", title_cases),
    ("similar sibling units", f"SIMILAR_UNIT {meaning.SIMILAR_UNIT}", unit_cases),
    ("vague_points", f"VAGUE_STOCK {meaning.VAGUE_STOCK}, VAGUE_RESTATES {meaning.VAGUE_RESTATES}", point_cases),
    ("off_book", f"OFF_BOOK {meaning.OFF_BOOK} (score: minus the nearer cosine)", section_cases),
    (
        "repeated_content",
        f"REPEATED_PARAGRAPH {meaning.REPEATED_PARAGRAPH}, REPEATED_WORDS {meaning.REPEATED_WORDS}",
        paragraph_cases,
    ),
    ("coverage (carried)", f"CARRIED {meaning.CARRIED} or most content words", ask_cases),
    ("from the worked example", f"FROM_EXAMPLE {meaning.FROM_EXAMPLE}", example_cases),
    ("overlap", f"OVERLAPPING_UNITS {meaning.OVERLAPPING_UNITS}", chapter_cases),
]


SAME_ASK_JACCARD = 0.5
REQUEST_SETS = (
    ("requests read", "requests"),
    ("requests read, held out", "requests_held_out"),
    ("requests read, with details", "requests_details"),
)


def same_ask(read: str, marked: str) -> bool:
    """An ask the reader gave is the marked one, or a piece of it, or holds it (by stemmed content words)."""
    left = content_words(read) or frozenset(read.casefold().split())
    right = content_words(marked) or frozenset(marked.casefold().split())
    return left <= right or right <= left or len(left & right) / len(left | right) >= SAME_ASK_JACCARD


def is_detail_read(read: str, details: list[str], marked: list[str]) -> bool:
    """The reader gave a marked detail ('Leeds', 'forty plots') as an ask: by its stemmed content words, it is one
    of the details or a piece of one, and no marked ask is that phrase itself."""
    words = content_words(read) or frozenset(read.casefold().split())
    if any(words == (content_words(m) or frozenset(m.casefold().split())) for m in marked):
        return False
    return any(words <= (content_words(d) or frozenset(d.casefold().split())) for d in details)


READING_SETS = (("readings", "readings"), ("readings, held out", "readings_held_out"))
FUNCTION_WORDS = FRAME_WORDS | PREPOSITIONS | DETERMINERS
SAME_STEM_FROM = 4  # letters a stem must have to count as the start of another ('govern', 'governor')


def key_words(phrase: str) -> frozenset[str]:
    """A subject's key words: its content words, stemmed, less the words that frame a request."""
    return frozenset(word for word in content_words(phrase) if word not in FUNCTION_WORDS)


def same_subject(read_subject: str, marked: str) -> bool:
    """Both name the same subject: each key word of one is a key word of the other, or its stem starts the other's."""

    def close(a: str, b: str) -> bool:
        return a == b or (min(len(a), len(b)) >= SAME_STEM_FROM and (a.startswith(b) or b.startswith(a)))

    left, right = key_words(read_subject), key_words(marked)
    return (
        bool(left)
        and all(any(close(a, b) for b in right) for a in left)
        and all(any(close(b, a) for a in left) for b in right)
    )


def scored(found: list[str], marked: list[str]) -> tuple[list[str], list[str]]:
    """(what was read that is none of the marked, what was marked that nothing read is)."""
    wrong = [f for f in found if not any(same_ask(f, m) for m in marked)]
    missed = [m for m in marked if not any(same_ask(f, m) for f in found)]
    return wrong, missed


def reading_judgements(name: str, folder: Path, set_name: str) -> list[Judgement]:
    """The reading (reading.read) on one labelled set: the subject (items: requests; precision: the share read right),
    the audience and the concerns (as asks)."""
    entries = load(folder, set_name)["requests"]
    readings = [read(entry["request"]) for entry in entries]
    wrong_subjects = [
        f"{reading.subject!r} for {entry['subject']!r} in {entry['request'][:60]}"
        for entry, reading in zip(entries, readings)
        if not any(same_subject(reading.subject, m) for m in [entry["subject"], *entry["subject_alternatives"]])
    ]
    right = len(entries) - len(wrong_subjects)
    judgements = [
        Judgement(
            name=f"{name}: subject",
            threshold="rules (no model)",
            items=len(entries),
            positives=len(entries),
            precision=round(right / len(entries), 3),
            recall=round(right / len(entries), 3),
            misses=wrong_subjects,
        )
    ]
    for part in ("audience", "concerns"):
        pairs = [(list(getattr(reading, part)), list(entry[part])) for entry, reading in zip(entries, readings)]
        outcomes = [scored(found, marked) for found, marked in pairs]
        read_count, marked_count = sum(len(f) for f, _ in pairs), sum(len(m) for _, m in pairs)
        wrong, missed = sum(len(w) for w, _ in outcomes), sum(len(m) for _, m in outcomes)
        judgements.append(
            Judgement(
                name=f"{name}: {part}",
                threshold="rules (no model)",
                items=read_count,
                positives=marked_count,
                precision=round(1 - wrong / read_count, 3) if read_count else 1.0,
                recall=round(1 - missed / marked_count, 3) if marked_count else 1.0,
                misses=[m for _, ms in outcomes for m in ms],
                false_alarms=[w for ws, _ in outcomes for w in ws],
            )
        )
    return judgements


def reader_judgement(name: str, folder: Path, set_name: str) -> Judgement:
    """The request reader on one labelled set of requests: precision of what it read, recall of what was marked."""
    right = read_count = found = marked_count = 0
    misses: list[str] = []
    false_alarms: list[str] = []
    for entry in load(folder, set_name)["requests"]:
        read = [ask.text for ask in read_request(entry["request"])]
        marked: list[str] = entry["asks"]
        details: list[str] = entry.get("details", [])
        wrong = [r for r in read if not any(same_ask(r, m) for m in marked) or is_detail_read(r, details, marked)]
        missed = [m for m in marked if not any(same_ask(r, m) for r in read)]
        right, read_count = right + len(read) - len(wrong), read_count + len(read)
        found, marked_count = found + len(marked) - len(missed), marked_count + len(marked)
        misses += [f"{m} in {entry['request'][:60]}" for m in missed]
        false_alarms += [f"{w} in {entry['request'][:60]}" for w in wrong]
    return Judgement(
        name=name,
        threshold="rules (no model)",
        items=read_count,
        positives=marked_count,
        precision=round(right / read_count, 3) if read_count else 1.0,
        recall=round(found / marked_count, 3) if marked_count else 1.0,
        misses=misses,
        false_alarms=false_alarms,
    )


def calibrate(folder: Path = DEFAULT_DIR, embedder: Embedder | None = None) -> Calibration:
    embedder = embedder or open_embedder()
    return Calibration(
        model=embedder.name,
        judgements=[judgement(name, threshold, cases(embedder, folder)) for name, threshold, cases in JUDGEMENTS]
        + [reader_judgement(name, folder, set_name) for name, set_name in REQUEST_SETS]
        + [j for name, set_name in READING_SETS for j in reading_judgements(name, folder, set_name)]
        + off_request_judgements(folder),
    )


def off_request_judgements(folder: Path) -> list[Judgement]:
    """The off-request judgement, by its own model (none when its wheel is not installed)."""
    judge = open_judge()
    if judge is None:
        return []
    threshold = f"OFF_REQUEST {OFF_REQUEST} ({judge.name}; score: minus the fit)"
    subject = f"ON_SUBJECT {ON_SUBJECT} ({judge.name}; score: minus the lower fit)"
    return [judgement("off_request", threshold, off_request_cases(judge, folder))] + [
        judgement(name, subject, subject_cases(judge, folder, set_name)) for name, set_name in SUBJECT_SETS
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.bench.studies.calibrate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR, help="the labelled sets")
    parser.add_argument("--misses", action="store_true", help="list every miss and false alarm")
    parser.add_argument(
        "--good-writing", action="store_true", help="judge the good-writing corpus's books too (a few minutes)"
    )
    args = parser.parse_args(argv)
    calibration = calibrate(args.folder)
    if args.good_writing:
        calibration.judgements += good_writing_judgements()
    print(table(calibration))
    if args.misses:
        for j in calibration.judgements:
            for what in j.misses:
                print(f"{j.name}: missed {what}")
            for what in j.false_alarms:
                print(f"{j.name}: false alarm {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
