"""The audit's rules: one plain function each, in one ordered, named table (markdown-it-py's rule chain is the
model).

Each rule takes an AuditBook (a meaning rule, also its BookMeaning) and returns its Defects; every defect names its
rule, the section id and title, and the evidence. `choose_rules` picks among them by name (the `rule` / `skip_rule`
settings).

Two kinds of author write books (records' Author): a small model, and a capable author (a larger model, or a
person). Each rule of RULES says which kinds it is shown to judge well, measured on the good-writing corpus's clean
books, copies of them with defects planted, and the small model's junk (examples/audit_both_sides.py; the table in
docs/figures.md). On a book by another kind its findings are figures: counted and listed with the measurement that
says why (`why`), but no defect; the writer asks no candidate for them, the repair leaves them, the run's last line
does not name them, and they gate only when the fail_on setting names them.

A run and a Markdown file are judged by what each says of itself: titles by path (the same title under one
parent is a duplicate, under two parents a repeated title); the near-empty floor from the words a run asked
for, or from a Markdown block's peers (its siblings, else its heading level, else the file), or a capable author's
stub.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.audit.book import AuditBook, AuditSection, headings_of
from pipeline.audit.meaningrules import (
    rule_off_book,
    rule_off_point,
    rule_off_subject,
    rule_repeated_content,
    rule_stray_headings,
    rule_unsupported,
)
from pipeline.errors import UsageError
from pipeline.meaning.offensive import offensive_words
from pipeline.records import Author
from pipeline.records.audit import BookMeaning, Defect
from pipeline.sources.markers import cited_numbers
from pipeline.text import (
    close_open_fence,
    ends_closed,
    ends_on_whole_item,
    prose_words,
    repetition_loop,
    shingles,
    words_of,
)
from pipeline.titles import TitleIndex, title_key

WORD_FLOOR = 40  # a section below this many words is near-empty, when nothing says what it should hold
EMPTY_SHARE = 0.16  # ... or below this share of the words it was asked for (40 of the default 250)
SHORT_SHARE = 0.1  # a Markdown block below this share of its peers' median words is near-empty
MIN_PEERS = 3  # blocks a Markdown block is compared with, at the least, before a wider group is taken
STUB_WORDS = 3  # a capable author's section of fewer words is a stub ('TBD', 'Coming soon.'); the good-writing
# corpus's shortest is 5 ('Used to tighten a line.'), and 15 of its 3,024 are under a small model's Markdown floor
SHARED_PASSAGE_WORDS = 12  # a run of this many words in two sections is a repeated passage
# A section with this share of its passages in one earlier section repeats it. The good-writing corpus's highest
# shares are its sources' own twin pages (the Vue guide's 'Typing Event Handlers' for two APIs, 1.0; Prometheus's
# 'IANA' and 'Security' for two exposition formats, 0.88 and 0.85), then 0.53 and below (a worked example told again).
COPIED_SHARE = 0.6
OUTLIER_FACTOR = 3.0


def rule_duplicate_titles(book: AuditBook) -> list[Defect]:
    """The same title twice among the children of one parent (a part's chapters, a chapter's sections)."""
    return [found for found, same_parent in title_repeats(book) if same_parent]


def rule_repeated_titles(book: AuditBook) -> list[Defect]:
    """The same title at one level under different parents, with both paths: a defect in a small model's book, whose
    plan gives every title once; in a reference (`Event: 'close'` of two classes) or release notes (`Language` of
    every version) what the document is made of, so a capable author's are figures."""
    return [found for found, same_parent in title_repeats(book) if not same_parent]


def title_repeats(book: AuditBook) -> list[tuple[Defect, bool]]:
    """Each title that an earlier one of its level already has, with whether the earlier one shares its parent
    (a title repeated under its own parent is a duplicate even when it also occurs elsewhere)."""
    found = []
    for level, items in book.levels():
        first_seen: dict[str, str] = {}  # title key -> the first id with it
        under_parent: dict[tuple[str | None, str], str] = {}  # (parent, title key) -> the first id there
        for item_id, title in items:
            key, parent = title_key(title), book.parents.get(item_id)
            sibling = under_parent.setdefault((parent, key), item_id)
            if sibling != item_id:
                detail = f"{level} title also at {sibling}, under the same parent"
                found.append((Defect(rule="duplicate", section_id=item_id, title=title, detail=detail), True))
            elif key in first_seen:
                other = first_seen[key]
                detail = f"{level} title also at {other}: {book.path(other)!r} and {book.path(item_id)!r}"
                found.append((Defect(rule="repeated_title", section_id=item_id, title=title, detail=detail), False))
            first_seen.setdefault(key, item_id)
    return found


def rule_near_duplicate_titles(book: AuditBook) -> list[Defect]:
    """Titles of one level, below the top one, whose words nearly match an earlier title's."""
    found = []
    for level, items in book.levels()[1:]:
        for (id_b, title_b), (id_a, title_a) in near_pairs(items):
            found.append(
                Defect(
                    rule="near_duplicate",
                    section_id=id_b,
                    title=title_b,
                    detail=f"{level} title close to {id_a} {title_a!r}",
                )
            )
    return found


def near_pairs(items: list[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Each title whose words overlap an earlier title's by titles.SIMILAR or more (exact duplicates are another
    rule's), with the earliest such title: titles.TitleIndex over every word of a title."""
    index = TitleIndex(words=words_of)
    pairs = []
    for item in items:
        if (earlier := index.near_index(item[1], same=False)) is not None:
            pairs.append((item, items[earlier]))
        index.add(item[1])
    return pairs


def rule_truncated(book: AuditBook) -> list[Defect]:
    found = []
    for section in book.sections:
        if section.error is not None or not section.text.strip():
            continue
        if ends_closed(section.text):
            continue  # a capped answer cut back to its last full sentence reads as finished
        if book.from_journal and section.finish_reason == "length":
            found.append(section.defect("truncated", "finish_reason=length and it ends mid-sentence"))
        elif not book.from_journal and not ends_on_whole_item(section.text):
            tail = " ".join(section.text.split()[-6:])
            found.append(section.defect("truncated", f"ends without closing punctuation: …{tail!r}"))
    return found


def rule_empty(book: AuditBook) -> list[Defect]:
    found = []
    for section, (floor, why) in zip(book.sections, word_floors(book)):
        if section.error is None and (section.words == 0 or section.words < floor):
            found.append(section.defect("empty", f"{section.words} words (floor {floor:g}: {why})"))
    return found


def word_floor(target_words: int | None) -> float:
    """The near-empty floor of a section asked for `target_words` words: EMPTY_SHARE of them (40 at the
    default 250), or WORD_FLOOR when the words asked are not known."""
    return round(target_words * EMPTY_SHARE) if target_words else WORD_FLOOR


def word_floors(book: AuditBook) -> list[tuple[float, str]]:
    """(floor, where it comes from) for each section: from the words asked in a run; in a Markdown file,
    SHORT_SHARE of the median of its peers (a block far below its siblings), never above WORD_FLOOR, so a
    reference's 5-word entry among 30-word ones passes and a 2-word one does not. A capable author's short section
    is its own ('Used to tighten a line.'), so in its book only a stub is near-empty: under STUB_WORDS."""
    if book.author is Author.CAPABLE:
        return [(float(STUB_WORDS), "a capable author's stub")] * len(book.sections)
    if book.from_journal:
        floor = word_floor(book.target_words)
        why = f"{EMPTY_SHARE:.0%} of the {book.target_words} words asked" if book.target_words else "no words asked"
        return [(floor, why)] * len(book.sections)
    found = []
    for words, group in peer_words(book):
        if not words:
            found.append((float(WORD_FLOOR), "no other block to compare"))
            continue
        median = statistics.median(words)
        found.append(
            (round(min(WORD_FLOOR, SHORT_SHARE * median), 1), f"{SHORT_SHARE:.0%} of {group} median {median:g}")
        )
    return found


def peer_words(book: AuditBook) -> list[tuple[list[int], str]]:
    """For each section of a Markdown file, the words of the blocks it is compared with, and what they are: its
    siblings with text when it has MIN_PEERS of them, else the blocks of its heading level, else every other
    block."""
    levels = {node.id: node.level for node in book.nodes}
    by_parent: dict[str | None, list[AuditSection]] = {}
    by_level: dict[str, list[AuditSection]] = {}
    for section in book.sections:
        if section.words:
            by_parent.setdefault(book.parents.get(section.id), []).append(section)
            by_level.setdefault(levels.get(section.id, ""), []).append(section)
    every = [s for s in book.sections if s.words]
    found = []
    for section in book.sections:
        for group, name in (
            (by_parent.get(book.parents.get(section.id), []), "its siblings'"),
            (by_level.get(levels.get(section.id, ""), []), f"the {levels.get(section.id)} blocks'"),
            (every, "the book's blocks'"),
        ):
            others = [s.words for s in group if s is not section]
            if len(others) >= MIN_PEERS or group is every:
                found.append((others, name))
                break
    return found


def rule_failed(book: AuditBook) -> list[Defect]:
    return [s.defect("failed", s.error or "") for s in book.sections if s.error is not None]


def rule_unclosed_fence(book: AuditBook) -> list[Defect]:
    return [
        s.defect("unclosed_fence", "a code fence is opened and never closed")
        for s in book.sections
        if s.text and close_open_fence(s.text) != s.text
    ]


def rule_repeated_passages(book: AuditBook) -> list[Defect]:
    """A run of SHARED_PASSAGE_WORDS words of prose that appears in more than one section; the example is the
    section's first such run in its text's order, so two audits of one book say the same. Code blocks are not
    read (pipeline/text.py's prose_words): a programming book shows `use std::io;` in chapter after chapter."""
    owners: dict[tuple[str, ...], str] = {}
    found: dict[str, Defect] = {}
    by_id = {s.id: s for s in book.sections}
    for section in book.sections:
        words = [word for _, word in prose_words(section.text)]
        for gram in dict.fromkeys(shingles(words, SHARED_PASSAGE_WORDS)):
            first = owners.setdefault(gram, section.id)
            if first != section.id and section.id not in found:
                detail = f"shares {' '.join(gram)!r} with {first} {by_id[first].title!r}"
                found[section.id] = section.defect("repeated_passages", detail)
    return list(found.values())


def rule_repeated_section(book: AuditBook) -> list[Defect]:
    """A section whose prose is mostly an earlier section's: COPIED_SHARE or more of its SHARED_PASSAGE_WORDS-word
    passages are in that one section. An author quotes a definition or a statute again; a section given another's
    text is a repeat a reader sees."""
    owners: dict[tuple[str, ...], list[int]] = {}  # a passage -> the earlier sections that have it
    held: list[set[tuple[str, ...]]] = []
    found = []
    for index, section in enumerate(book.sections):
        grams = set(shingles([word for _, word in prose_words(section.text)], SHARED_PASSAGE_WORDS))
        if grams and (shared := most_shared(grams, owners, held)) is not None:
            other, count = shared
            if count >= COPIED_SHARE * len(grams):
                earlier = book.sections[other]
                detail = f"{count / len(grams):.0%} of its text is in {earlier.id} {earlier.title!r}"
                found.append(section.defect("repeated_section", detail))
        held.append(grams)
        for gram in grams:
            owners.setdefault(gram, []).append(index)
    return found


def most_shared(
    grams: set[tuple[str, ...]], owners: dict[tuple[str, ...], list[int]], held: list[set[tuple[str, ...]]]
) -> tuple[int, int] | None:
    """The earlier section that shares the most of `grams` (the first of equals) and how many it shares, among those
    that could share COPIED_SHARE of them: one that does has one of any len(grams) - ceil(COPIED_SHARE x len(grams)) + 1
    of them, so only the owners of the rarest so many are counted."""
    rarest = sorted(grams, key=lambda gram: len(owners.get(gram, ())))
    rarest = rarest[: len(grams) - math.ceil(COPIED_SHARE * len(grams)) + 1]
    candidates = sorted({other for gram in rarest for other in owners.get(gram, ())})
    counted = [(other, len(grams & held[other])) for other in candidates]
    return max(counted, key=lambda pair: pair[1], default=None)


def rule_repetition_loop(book: AuditBook) -> list[Defect]:
    """A loop inside one section: a run of words that comes three times, two of them back to back
    (pipeline/text.py's repetition_loop)."""
    found = []
    for section in book.sections:
        if loop := repetition_loop(section.text, cut=section.finish_reason == "length"):
            found.append(section.defect("repetition_loop", f"{' '.join(loop.words)!r} {loop.times} times"))
    return found


def rule_heading_outranks(book: AuditBook) -> list[Defect]:
    """Headings inside a body at the section's level or above (demoted in book.md by assembly)."""
    if not book.from_journal:
        return []
    found = []
    for section in book.sections:
        levels = [level for _, level, _ in headings_of(section.text) if level <= 4]
        if levels:
            found.append(section.defect("heading_outranks", f"{len(levels)} heading(s) at h{min(levels)}"))
    return found


def rule_word_count_outliers(book: AuditBook) -> list[Defect]:
    """Sections OUTLIER_FACTOR times longer or shorter than the median: of the whole book in a run (every
    section was asked for the same words), of its peers in a Markdown file (peer_words)."""
    if book.from_journal:
        counts = [s.words for s in book.sections if s.error is None and s.words]
        if len(counts) < 4:
            return []
        medians = [(float(statistics.median(counts)), "a median")] * len(book.sections)
    else:
        medians = [
            (float(statistics.median(words)), f"{group} median") if len(words) >= MIN_PEERS else (math.nan, "")
            for words, group in peer_words(book)
        ]
    return [
        s.defect("word_count_outliers", f"{s.words} words against {group} of {median:g}")
        for s, (median, group) in zip(book.sections, medians)
        if s.error is None and s.words and (s.words > median * OUTLIER_FACTOR or s.words < median / OUTLIER_FACTOR)
    ]


def rule_offensive(book: AuditBook) -> list[Defect]:
    """A word a handbook would not print (an obscenity or a slur, pipeline/meaning/offensive.py) in a title, a key point
    or a section's text; each node once, naming the words."""
    found = []
    for node in book.nodes:
        if words := offensive_words(f"{node.title}\n{book.points.get(node.id, '')}"):
            found.append(Defect(rule="offensive", section_id=node.id, title=node.title, detail=", ".join(words)))
    for section in book.sections:
        if words := offensive_words(section.text):
            found.append(section.defect("offensive", "in its text: " + ", ".join(words)))
    return found


def rule_uncited(book: AuditBook) -> list[Defect]:
    """A section written from source passages that cites none of them (a run's journal says what it was given)."""
    return [
        section.defect("uncited", f"given {len(section.passages)} passages, cites none")
        for section in book.sections
        if section.written_from_sources and section.error is None and section.text and not cited_numbers(section.text)
    ]


WordCheck = Callable[[AuditBook], list[Defect]]
MeaningCheck = Callable[[AuditBook, BookMeaning], list[Defect]]
BOTH = frozenset(Author)
SMALL = frozenset({Author.SMALL})


@dataclass(frozen=True)
class Rule:
    """One rule of the audit: what it finds, how the run's last line names what it found, and the kinds of author
    it is shown to judge well (measured on the good-writing corpus, its planted copies and the small model's
    labelled junk: examples/audit_both_sides.py, docs/figures.md). On a book by another kind of author its findings
    are a figure, not a defect, and `why` is the measurement that says so."""

    check: WordCheck | None = None
    meaning: MeaningCheck | None = None
    noun: str = "section"  # what it flags, for the last line: '2 sections cut off mid-sentence'
    finds: str = ""
    judges: frozenset[Author] = BOTH
    why: str = ""

    def find(self, book: AuditBook, meaning: BookMeaning) -> list[Defect]:
        if self.check is not None:
            return self.check(book)
        return self.meaning(book, meaning) if self.meaning is not None else []

    def says(self, count: int) -> str:
        """'2 sections cut off mid-sentence'."""
        return f"{count} {self.noun}{'' if count == 1 else 's'} {self.finds}"


RULES: dict[str, Rule] = {
    "duplicate": Rule(rule_duplicate_titles, noun="title", finds="said twice under one parent"),
    "repeated_title": Rule(
        rule_repeated_titles,
        noun="title",
        finds="said again under another parent",
        judges=SMALL,
        why="a reference repeats `Event: 'close'` under each class: 2.5 % of the good-writing corpus's sections repeat "
        "a title of another parent",
    ),
    "near_duplicate": Rule(
        rule_near_duplicate_titles,
        noun="title",
        finds="close to another's words",
        judges=SMALL,
        why="an author's parallel titles share most of their words ('Resistors in Series', 'Resistors in Parallel'): "
        "0.4 % of the good-writing corpus's sections",
    ),
    "truncated": Rule(rule_truncated, finds="cut off mid-sentence"),
    "empty": Rule(rule_empty, finds="empty or near it"),
    "failed": Rule(rule_failed, finds="never written"),
    "unclosed_fence": Rule(rule_unclosed_fence, finds="with a code fence left open"),
    "repeated_passages": Rule(
        rule_repeated_passages,
        finds="sharing a passage with another",
        judges=SMALL,
        why="an author quotes a definition, a statute or a worked example again: 3.1 % of the good-writing corpus's "
        "sections",
    ),
    "repeated_section": Rule(rule_repeated_section, finds="repeating most of an earlier section"),
    "repetition_loop": Rule(rule_repetition_loop, finds="saying the same words over and over"),
    "heading_outranks": Rule(rule_heading_outranks, finds="with a heading at their own level or above"),
    "word_count_outliers": Rule(
        rule_word_count_outliers,
        finds="three times longer or shorter than their peers",
        judges=SMALL,
        why="an author's entries run from two words to two pages: 11.4 % of the good-writing corpus's sections are "
        "three times longer or shorter than their peers",
    ),
    "offensive": Rule(rule_offensive, finds="with a word a handbook would not print"),
    "uncited": Rule(rule_uncited, finds="citing none of their sources"),
    "off_point": Rule(
        meaning=rule_off_point,
        finds="nearer a sibling's point than their own",
        judges=SMALL,
        why="41 % of the good-writing corpus's sections are nearer a sibling's title than their own; a text moved "
        "under its sibling's heading is told from its own with a ROC AUC of 0.81",
    ),
    "off_book": Rule(
        meaning=rule_off_book,
        finds="far from the book",
        judges=SMALL,
        why="the static model finds an author's text far from a plain one-line request and its headings: 3.3 % of "
        "the good-writing corpus's sections, 7.0 % of the held-out books'",
    ),
    "off_subject": Rule(meaning=rule_off_subject, finds="off the request"),
    "repeated_content": Rule(
        meaning=rule_repeated_content,
        finds="saying what an earlier section says",
        judges=SMALL,
        why="an author's parallel paragraphs differ in their key terms ('a binomial distribution', 'a geometric "
        "distribution'): 5.2 % of the good-writing corpus's sections, and of ten flagged pairs a reader agreed with "
        "three",
    ),
    "stray_headings": Rule(meaning=rule_stray_headings, finds="with headings inside their text"),
    "unsupported": Rule(meaning=rule_unsupported, finds="with a sentence their source does not support"),
}
RULE_NAMES = list(RULES)
# The rules that read only the outline's titles: what `fanout plan` audits before any section is written.
TITLE_RULES = ["duplicate", "repeated_title", "near_duplicate", "offensive"]


def judges(name: str, author: Author) -> bool:
    """Whether the rule is shown to judge this kind of author's books well: what it finds is a defect there, and the
    writer, the repair and the run's last line act on it."""
    return author in RULES[name].judges


def figure_rules(book: AuditBook) -> list[str]:
    """The rules whose findings are figures in this book: those not shown to judge its kind of author."""
    return [name for name in RULE_NAMES if not judges(name, book.author)]


def choose_rules(only: list[str] | None, skip: list[str] | None) -> list[str]:
    """The names of the rules to run, in order (the `rule` / `skip_rule` settings)."""
    for name in (only or []) + (skip or []):
        if name not in RULE_NAMES:
            raise UsageError(f"unknown audit rule {name!r} (rules: {', '.join(RULE_NAMES)})")
    return [n for n in RULE_NAMES if (not only or n in only) and n not in (skip or [])]


def find_defects(book: AuditBook, meaning: BookMeaning, names: list[str]) -> list[Defect]:
    """Every defect the named rules find, rule by rule in their order."""
    return [found for name in names for found in RULES[name].find(book, meaning)]
