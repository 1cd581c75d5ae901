"""Quality figures of a book: how much its prose repeats, how long and how finished its sections are, and
how its titles echo their ancestors, repeat their siblings or stand in for a missing title.

Takes an AuditBook, the book's title, the user's prompt and the words asked for per section (a bare
Markdown book has neither of the last two) and returns a SectionQuality a section and one BookQuality.
FIGURES defines each book figure in one line, for the printed table and docs/figures.md. A `--fail-on`
threshold on a figure (`distinct_2<0.5`) parses to a Threshold.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from pipeline.audit.book import AuditBook, AuditSection
from pipeline.errors import UsageError
from pipeline.records.audit import TITLE_LEVEL, BookMeaning, BookQuality, SectionQuality
from pipeline.text import ends_closed, shingles, words_of
from pipeline.titles import echoes, near_duplicates, non_words

if TYPE_CHECKING:
    from rich.table import Table

REPEAT_GRAM = 4  # seq-rep-4
REPETITIVE = 0.3  # a section above this seq-rep-4 counts in sections_over_0_3
# What the planner named a missing title before outline.json flagged placeholders ("Part 3",
# "Sourdough (section 3)"); a quote mark was appended while the name was taken.
OLD_PLACEHOLDER = re.compile(r"^(?:(?:Part|Chapter|Section) \d+|.+ \((?:chapter|section) \d+\))'*$")
DIGITS = 4

FIGURES: dict[str, str] = {
    "distinct_2": "unique word bigrams ÷ bigrams, taken within each section and pooled over the book "
    "(1 = no two-word phrase recurs)",
    "seq_rep_4_median": "median over sections of seq-rep-4: 1 − unique word 4-grams ÷ 4-grams (0 = no repeats)",
    "seq_rep_4_max": "the highest seq-rep-4 of any section",
    "sections_over_0_3": "sections whose seq-rep-4 is over 0.3",
    "unfinished_share": "share of sections whose text does not end on closing punctuation or a closed code fence",
    "words_median": "median words per section",
    "length_ratio_median": "median of a section's words ÷ the words asked for per section (run folders only)",
    "title_echo_rate": "share of part, chapter and section titles that repeat the book title, the prompt, "
    "their part or their chapter",
    "placeholder_titles": "numbered stand-in titles: flagged in outline.json, or named like 'Part 3' or "
    "'… (section 3)'",
    "near_duplicate_titles": "pairs of sibling titles (same parent) that say the same thing",
    "non_words": "titles with a word that is neither English (wordfreq's list) nor a word of the request",
    "repeated_passages": "sections sharing a 12-word passage with an earlier section",
    "sections": "sections measured: every section but those whose every attempt failed",
    "on_point": "share of sections (in chapters of two or more) whose text is nearer their own title and key point "
    "than any sibling's, by meaning (chance: 1 ÷ siblings)",
    "on_point_margin": "median over those sections of: cosine to their own title and point minus the nearest sibling's",
    "on_point_unrestated": "on_point with every sentence that repeats the point's content words removed",
    "restating_openings": "share of sections whose first sentence restates their key point",
    "similar_titles": "pairs of titles of one level, anywhere in the book, that say the same thing (by meaning or "
    "by ≥ 75% shared content words)",
    "off_book": "sections whose text is far from the book's request and from every heading above them, by meaning",
    "vague_points": "key points that say nothing of their own: near a stock phrase ('what you need to know') or "
    "only restating their title",
    "repeated_content": "sections with a paragraph that says what a paragraph of an earlier section says, by meaning",
    "stray_headings": "headings inside a section's text (run folders only): in the book they read as sections",
    "coverage": "share of what the request names (its subject and each concern it names) that the book's title "
    "or some title and point carries (run folders only)",
    "overlap": "pairs of chapters (or parts) whose sections' titles and points, pooled, cover the same ground",
    "off_request": "parts and chapters whose title and point are not about the request's subject or any concern "
    "it names, by a sentence encoder (run folders only)",
    "on_subject": "share of written sections whose title and point and text's opening are about the request, by a "
    "sentence encoder calibrated on sections labelled by reading (run folders only)",
}
MEANING_FIGURES = {
    "on_point": "on_point",
    "on_point_margin": "on_point_margin_median",
    "on_point_unrestated": "on_point_unrestated",
    "restating_openings": "restating_openings",
    "similar_titles": "similar_titles",
    "off_book": "off_book",
    "vague_points": "vague_points",
    "repeated_content": "repeated_content",
    "stray_headings": "stray_headings",
    "coverage": "coverage",
    "overlap": "overlap",
    "off_request": "off_request",
    "on_subject": "on_subject",
}  # figure -> its BookMeaning field


# ---------------------------------------------------------------- prose


def seq_rep(words: list[str], size: int = REPEAT_GRAM) -> float:
    """1 − unique n-grams ÷ n-grams; 0 when the text is too short to have one."""
    grams = shingles(words, size)
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def distinct(sections: list[list[str]], size: int = 2) -> float:
    """Unique n-grams ÷ n-grams over the book; an n-gram never spans two sections. 1 when there are none."""
    grams = [gram for words in sections for gram in shingles(words, size)]
    return len(set(grams)) / len(grams) if grams else 1.0


def section_quality(section: AuditSection, words: list[str], target: int | None) -> SectionQuality:
    return SectionQuality(
        id=section.id,
        title=section.title,
        words=len(words),
        seq_rep_4=round(seq_rep(words), DIGITS),
        length_ratio=round(len(words) / target, DIGITS) if target else None,
        unfinished=not ends_closed(section.text),
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def share(count: int, total: int) -> float:
    return round(count / total, DIGITS) if total else 0.0


# ---------------------------------------------------------------- titles


def title_nodes(book: AuditBook) -> list[tuple[str, str, str]]:
    """(level, id, title) of every part, chapter and section (every heading of a Markdown file but its title:
    the book's own title cannot echo it)."""
    return [
        (level, node_id, title) for level, items in book.levels() if level != TITLE_LEVEL for node_id, title in items
    ]


def ancestors_of(
    node_id: str, book: AuditBook, levels: dict[str, tuple[str, str]], title: str, prompt: str | None
) -> list[tuple[str, str]]:
    """(what, text) a title may echo: the book title, the prompt, its part, its chapter."""
    chain = []
    parent = book.parents.get(node_id)
    while parent in levels:
        chain.append(levels[parent])
        parent = book.parents.get(parent)
    return [("book title", title), ("prompt", prompt or "")] + chain[::-1]


def echoing_titles(book: AuditBook, title: str, prompt: str | None) -> list[str]:
    """'id: title ~ what it echoes' for each title that echoes one of its ancestors."""
    nodes = title_nodes(book)
    levels = {node_id: (level, text) for level, node_id, text in nodes}
    found = []
    for _, node_id, text in nodes:
        for what, ancestor in ancestors_of(node_id, book, levels, title, prompt):
            if ancestor and echoes(text, ancestor):
                found.append(f"{node_id}: {text} ~ {what} {ancestor!r}")
                break
    return found


def non_word_titles(book: AuditBook, prompt: str | None) -> list[str]:
    """'id: title (the words)' for each title with a word that is neither English nor the request's."""
    found = []
    for _, node_id, text in title_nodes(book):
        if node_id not in book.placeholders and (odd := non_words(text, prompt or "")):
            found.append(f"{node_id}: {text} ({', '.join(odd)})")
    return found


def placeholder_count(book: AuditBook) -> int:
    return sum(
        node_id in book.placeholders or bool(OLD_PLACEHOLDER.match(text)) for _, node_id, text in title_nodes(book)
    )


def near_duplicate_pairs(book: AuditBook) -> int:
    """Pairs of titles at one level under one parent that near_duplicates (equal ones included)."""
    siblings: dict[tuple[str, str | None], list[str]] = {}
    for level, node_id, text in title_nodes(book):
        siblings.setdefault((level, book.parents.get(node_id)), []).append(text)
    return sum(near_duplicates(a, b) for group in siblings.values() for a, b in combinations(group, 2))


# ---------------------------------------------------------------- the figures


def measure(
    book: AuditBook,
    title: str = "",
    prompt: str | None = None,
    target: int | None = None,
    repeated_passages: int = 0,
    meaning: BookMeaning | None = None,
) -> tuple[BookQuality, list[SectionQuality]]:
    """The book's figures and each written section's (a failed one has no text to measure; the failed
    rule counts it). `repeated_passages` is the audit rule's count; `meaning` gives the figures by meaning."""
    written = [section for section in book.sections if section.error is None]
    words = [words_of(section.text) for section in written]
    sections = [section_quality(s, w, target) for s, w in zip(written, words)]
    reps = [s.seq_rep_4 for s in sections]
    echoing = echoing_titles(book, title, prompt)
    odd = non_word_titles(book, prompt)
    ratios = [s.length_ratio for s in sections if s.length_ratio is not None]  # all of them, given a target
    quality = BookQuality(
        distinct_2=round(distinct(words), DIGITS),
        seq_rep_4_median=round(median(reps), DIGITS),
        seq_rep_4_max=max(reps, default=0.0),
        sections_over_0_3=sum(rep > REPETITIVE for rep in reps),
        unfinished_share=share(sum(s.unfinished for s in sections), len(sections)),
        words_median=median([s.words for s in sections]),
        length_ratio_median=round(median(ratios), DIGITS) if target else None,
        title_echo_rate=share(len(echoing), len(title_nodes(book))),
        placeholder_titles=placeholder_count(book),
        near_duplicate_titles=near_duplicate_pairs(book),
        non_words=len(odd),
        repeated_passages=repeated_passages,
        sections=len(sections),
        echoing_titles=echoing,
        non_word_titles=odd,
        **({name: getattr(meaning, field) for name, field in MEANING_FIGURES.items()} if meaning else {}),
    )
    return quality, sections


# ---------------------------------------------------------------- thresholds and the table


THRESHOLD = re.compile(r"^(\w+)\s*([<>])\s*(\S+)$")


@dataclass(frozen=True)
class Threshold:
    name: str
    op: str  # ">" or "<"
    value: float

    def failure(self, quality: BookQuality) -> str | None:
        """'distinct_2 0.42 < 0.5' when the book crosses the threshold, else None."""
        actual = getattr(quality, self.name)
        if actual is None:
            raise UsageError(
                f"setting 'fail_on': {self.name} is not measured for this book (no words per section asked)"
            )
        crossed = actual > self.value if self.op == ">" else actual < self.value
        return f"{self.name} {actual:g} {self.op} {self.value:g}" if crossed else None


def parse_threshold(text: str) -> Threshold:
    known = f"figures: {', '.join(FIGURES)}"
    match = THRESHOLD.match(text.strip())
    if match is None:
        raise UsageError(f"setting 'fail_on': {text!r} is not NAME>VALUE or NAME<VALUE ({known})")
    name, op, number = match.groups()
    if name not in FIGURES:
        raise UsageError(f"setting 'fail_on': unknown quality figure {name!r} ({known})")
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"setting 'fail_on': {text!r}: {number!r} is not a number")
    return Threshold(name, op, value)


def figure_text(value: float | int | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def quality_table(quality: BookQuality) -> Table:
    """The readable table: one row a figure, its value and its definition."""
    from rich.table import Table

    table = Table(title="quality", header_style="bold")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("definition")
    for name, definition in FIGURES.items():
        table.add_row(name, figure_text(getattr(quality, name)), definition)
    if quality.echoing_titles:
        more = len(quality.echoing_titles) - 3
        table.caption = (
            "echoing titles: " + "; ".join(quality.echoing_titles[:3]) + (f" (+{more} more)" if more > 0 else "")
        )
    return table
