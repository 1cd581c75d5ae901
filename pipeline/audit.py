"""The audit: find every truncated, duplicate, empty, failed or looping section of a book.

Takes an AuditBook (loaded from a run folder — spec, outline, journal and book.md — or from a bare Markdown
book, split at its headings) and returns an AuditReport: every defect names its rule, the section id and
title, and the evidence; the report also carries the book's quality figures (pipeline.quality). Rules
are plain functions in one ordered, named list (markdown-it-py's rule chain is the model); `--rule` /
`--skip-rule` choose among them. The summary counts use seed 003's words and measures ("N section titles
occur more than once; M of K blocks (x%) end without closing punctuation").
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from markdown_it import MarkdownIt
from pydantic import BaseModel, Field

from pipeline.assemble import close_open_fence
from pipeline.errors import UsageError
from pipeline.journal import read_journal
from pipeline.quality import FIGURES, BookQuality, SectionQuality, Threshold, measure, parse_threshold
from pipeline.records import BookSpec, Node, Outline, SectionResult
from pipeline.text import LOOP_REPEATS, LOOP_WORDS, ends_closed, shingles, words_of
from pipeline.titles import title_key

if TYPE_CHECKING:
    from rich.table import Table

WORD_FLOOR = 40  # a section below this many words is near-empty
NEAR_DUPLICATE_JACCARD = 0.75
SHARED_PASSAGE_WORDS = 12  # a run of this many words in two sections is a repeated passage
OUTLIER_FACTOR = 3.0
SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\.?\s+")
_markdown = MarkdownIt("commonmark").enable("table")


class Defect(BaseModel):
    rule: str
    section_id: str
    title: str
    detail: str


class AuditReport(BaseModel):
    source: str
    sections: int
    blocks: int
    blocks_unpunctuated: int
    code_blocks: int
    rules: list[str]
    counts: dict[str, int]
    defects: list[Defect] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)
    quality: BookQuality
    section_quality: list[SectionQuality] = Field(default_factory=list)

    def ids(self, rule: str) -> list[str]:
        return [d.section_id for d in self.defects if d.rule == rule]


@dataclass
class AuditSection:
    id: str
    title: str
    text: str
    finish_reason: str | None = None
    error: str | None = None

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class AuditBook:
    source: str
    parts: list[tuple[str, str]]  # (id, title)
    chapters: list[tuple[str, str]]
    sections: list[AuditSection]
    from_journal: bool
    blocks: list[str] = field(default_factory=list)  # heading-delimited blocks of book.md, seed 003's unit
    title: str = ""
    prompt: str | None = None  # what the user asked for: run folders only
    target_words: int | None = None  # words asked for per section: run folders only
    parents: dict[str, str] = field(default_factory=dict)  # a chapter's or section's id -> its parent's id
    placeholders: set[str] = field(default_factory=set)  # ids outline.json flags as numbered stand-ins


# ---------------------------------------------------------------- loading


def load_run(folder: Path) -> AuditBook:
    try:
        outline = Outline.model_validate_json((folder / "outline.json").read_text())
    except (OSError, ValueError):
        raise UsageError(f"{folder}: not a fanout run folder (no valid outline.json)") from None
    journal = read_journal(folder / "sections.jsonl")
    sections = [run_section(section, journal.get(section.id)) for _, _, section in outline.sections()]
    book_md = folder / "book.md"
    blocks = heading_blocks(book_md.read_text()) if book_md.exists() else [s.text for s in sections]
    spec = read_spec(folder)
    parents = {c.id: p.id for p in outline.parts for c in p.chapters}
    parents.update({s.id: c.id for _, c, s in outline.sections()})
    return AuditBook(str(folder), [(p.id, p.title) for p in outline.parts],
                     [(c.id, c.title) for p in outline.parts for c in p.chapters], sections, True, blocks,
                     title=outline.title, prompt=spec.prompt if spec else None,
                     target_words=spec.words if spec else None, parents=parents,
                     placeholders={node.id for node in outline_nodes(outline) if node.placeholder})


def run_section(section: Node, result: SectionResult | None) -> AuditSection:
    if result is None:
        return AuditSection(section.id, section.title, "", error="never written")
    return AuditSection(section.id, section.title, result.text, result.finish_reason, result.error)


def read_spec(folder: Path) -> BookSpec | None:
    """The run's spec.json; None when it is missing or unreadable (the outline alone can be audited)."""
    try:
        return BookSpec.model_validate_json((folder / "spec.json").read_text())
    except (OSError, ValueError):
        return None


def outline_nodes(outline: Outline) -> list[Node]:
    return [node for part in outline.parts
            for node in (part, *part.chapters, *(s for c in part.chapters for s in c.sections))]


def headings_of(markdown: str) -> list[tuple[int, int, str]]:
    """(line, level, text) of every heading, code blocks excluded."""
    tokens = _markdown.parse(markdown)
    return [(t.map[0], int(t.tag[1]), tokens[i + 1].content) for i, t in enumerate(tokens)
            if t.type == "heading_open" and t.map]


def heading_blocks(markdown: str) -> list[str]:
    """The text between consecutive headings (seed 003 counted its blocks this way)."""
    lines = markdown.splitlines()
    starts = [line for line, _, _ in headings_of(markdown)] + [len(lines)]
    blocks = ["\n".join(lines[a + 1:b]).strip() for a, b in zip(starts, starts[1:])]
    return [b for b in blocks if b]


def load_markdown(path: Path) -> AuditBook:
    """A bare book: h2 parts, h3 chapters and the deepest heading level used as sections."""
    try:
        markdown = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    headings = headings_of(markdown)
    if not headings:
        raise UsageError(f"{path}: no headings, so no sections to audit")
    section_level = max(level for _, level, _ in headings)
    lines = markdown.splitlines()
    book = AuditBook(str(path), [], [], [], False, heading_blocks(markdown))
    bounds = [line for line, _, _ in headings] + [len(lines)]
    part = chapter = None  # the ids the next headings belong to
    for index, (line, level, text) in enumerate(headings):
        title = SECTION_NUMBER.sub("", text.removeprefix("Part ").strip())
        if level == section_level:
            body = "\n".join(lines[line + 1:bounds[index + 1]]).strip()
            book.sections.append(AuditSection(f"s{len(book.sections) + 1:04d}", title, body))
            add_child(book, book.sections[-1].id, chapter or part)
        elif level == 1 and not book.title:
            book.title = text.strip()
        elif level == 2:
            part, chapter = f"p{len(book.parts) + 1:02d}", None
            book.parts.append((part, title))
        elif level == 3:
            chapter = f"c{len(book.chapters) + 1:03d}"
            book.chapters.append((chapter, title))
            add_child(book, chapter, part)
    return book


def add_child(book: AuditBook, child: str, parent: str | None) -> None:
    if parent is not None:
        book.parents[child] = parent


def load_book(path: Path) -> AuditBook:
    if path.is_dir():
        return load_run(path)
    if path.exists():
        return load_markdown(path)
    raise UsageError(f"{path}: no such run folder or Markdown book")


# ---------------------------------------------------------------- helpers


def defect(rule: str, section: AuditSection, detail: str) -> Defect:
    return Defect(rule=rule, section_id=section.id, title=section.title, detail=detail)


# ---------------------------------------------------------------- rules


def rule_duplicate_titles(book: AuditBook) -> list[Defect]:
    found = []
    for level, items in (("part", book.parts), ("chapter", book.chapters),
                         ("section", [(s.id, s.title) for s in book.sections])):
        first_seen: dict[str, str] = {}
        for item_id, title in items:
            key = title_key(title)
            if key in first_seen:
                found.append(Defect(rule="duplicate", section_id=item_id, title=title,
                                    detail=f"{level} title also at {first_seen[key]}"))
            else:
                first_seen[key] = item_id
    return found


def rule_near_duplicate_titles(book: AuditBook) -> list[Defect]:
    found = []
    for level, items in (("chapter", book.chapters), ("section", [(s.id, s.title) for s in book.sections])):
        for (id_b, title_b), (id_a, title_a) in near_pairs(items):
            found.append(Defect(rule="near_duplicate", section_id=id_b, title=title_b,
                                detail=f"{level} title close to {id_a} {title_a!r}"))
    return found


def near_pairs(items: list[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Each title whose words overlap an earlier title's by NEAR_DUPLICATE_JACCARD or more (exact
    duplicates are another rule's), with the earliest such title. Prefix filtering keeps it near-linear:
    two sets that similar must share one of the rarest few words of each."""
    words = [set(words_of(title)) for _, title in items]
    frequency = Counter(word for bag in words for word in bag)
    index: dict[str, list[int]] = {}
    pairs = []
    for later, bag in enumerate(words):
        ordered = sorted(bag, key=lambda word: (frequency[word], word))
        prefix = ordered[:len(ordered) - math.ceil(NEAR_DUPLICATE_JACCARD * len(ordered)) + 1]
        for earlier in sorted({i for word in prefix for i in index.get(word, ())}):
            other = words[earlier]
            if title_key(items[earlier][1]) != title_key(items[later][1]) and \
                    len(bag & other) / len(bag | other) >= NEAR_DUPLICATE_JACCARD:
                pairs.append((items[later], items[earlier]))
                break
        for word in prefix:
            index.setdefault(word, []).append(later)
    return pairs


def rule_truncated(book: AuditBook) -> list[Defect]:
    found = []
    for section in book.sections:
        if section.error is not None or not section.text.strip():
            continue
        if ends_closed(section.text):
            continue  # a capped answer cut back to its last full sentence reads as finished
        if book.from_journal and section.finish_reason == "length":
            found.append(defect("truncated", section, "finish_reason=length and it ends mid-sentence"))
        elif not book.from_journal:
            tail = " ".join(section.text.split()[-6:])
            found.append(defect("truncated", section, f"ends without closing punctuation: …{tail!r}"))
    return found


def rule_empty(book: AuditBook) -> list[Defect]:
    return [defect("empty", s, f"{s.words} words (floor {WORD_FLOOR})") for s in book.sections
            if s.error is None and s.words < WORD_FLOOR]


def rule_failed(book: AuditBook) -> list[Defect]:
    return [defect("failed", s, s.error or "") for s in book.sections if s.error is not None]


def rule_unclosed_fence(book: AuditBook) -> list[Defect]:
    return [defect("unclosed_fence", s, "a code fence is opened and never closed") for s in book.sections
            if s.text and close_open_fence(s.text) != s.text]


def rule_repeated_passages(book: AuditBook) -> list[Defect]:
    """A run of SHARED_PASSAGE_WORDS words that appears in more than one section."""
    owners: dict[tuple[str, ...], str] = {}
    found: dict[str, Defect] = {}
    by_id = {s.id: s for s in book.sections}
    for section in book.sections:
        for gram in set(shingles(words_of(section.text), SHARED_PASSAGE_WORDS)):
            first = owners.setdefault(gram, section.id)
            if first != section.id and section.id not in found:
                found[section.id] = defect("repeated_passages", section,
                                           f"shares {' '.join(gram)!r} with {first} {by_id[first].title!r}")
    return list(found.values())


def rule_repetition_loop(book: AuditBook) -> list[Defect]:
    """The same run of LOOP_WORDS words LOOP_REPEATS times or more inside one section."""
    found = []
    for section in book.sections:
        counts = Counter(shingles(words_of(section.text), LOOP_WORDS))
        if counts:
            gram, times = counts.most_common(1)[0]
            if times >= LOOP_REPEATS:
                found.append(defect("repetition_loop", section, f"{' '.join(gram)!r} {times} times"))
    return found


def rule_heading_outranks(book: AuditBook) -> list[Defect]:
    """Headings inside a body at the section's level or above (demoted in book.md by assembly)."""
    if not book.from_journal:
        return []
    found = []
    for section in book.sections:
        levels = [level for _, level, _ in headings_of(section.text) if level <= 4]
        if levels:
            found.append(defect("heading_outranks", section, f"{len(levels)} heading(s) at h{min(levels)}"))
    return found


def rule_word_count_outliers(book: AuditBook) -> list[Defect]:
    counts = [s.words for s in book.sections if s.error is None and s.words]
    if len(counts) < 4:
        return []
    median = statistics.median(counts)
    return [defect("word_count_outliers", s, f"{s.words} words against a median of {median:g}")
            for s in book.sections if s.error is None and s.words
            and (s.words > median * OUTLIER_FACTOR or s.words < median / OUTLIER_FACTOR)]


Rule = Callable[[AuditBook], list[Defect]]
RULES: list[tuple[str, Rule]] = [
    ("duplicate", rule_duplicate_titles),
    ("near_duplicate", rule_near_duplicate_titles),
    ("truncated", rule_truncated),
    ("empty", rule_empty),
    ("failed", rule_failed),
    ("unclosed_fence", rule_unclosed_fence),
    ("repeated_passages", rule_repeated_passages),
    ("repetition_loop", rule_repetition_loop),
    ("heading_outranks", rule_heading_outranks),
    ("word_count_outliers", rule_word_count_outliers),
]
RULE_NAMES = [name for name, _ in RULES]


# ---------------------------------------------------------------- report


def choose_rules(only: list[str] | None, skip: list[str] | None) -> list[tuple[str, Rule]]:
    for name in (only or []) + (skip or []):
        if name not in RULE_NAMES:
            raise UsageError(f"unknown audit rule {name!r} (rules: {', '.join(RULE_NAMES)})")
    return [(n, r) for n, r in RULES if (not only or n in only) and n not in (skip or [])]


def code_block_count(book: AuditBook) -> int:
    return sum(t.type == "fence" for s in book.sections for t in _markdown.parse(close_open_fence(s.text)))


def audit(book: AuditBook, only: list[str] | None = None, skip: list[str] | None = None) -> AuditReport:
    rules = choose_rules(only, skip)
    defects = [d for _, rule in rules for d in rule(book)]
    counts = {name: sum(d.rule == name for d in defects) for name, _ in rules}
    unpunctuated = sum(not ends_closed(block) for block in book.blocks)
    repeated = counts.get("repeated_passages")
    quality, per_section = measure(book, book.title, book.prompt, book.target_words,
                                   len(rule_repeated_passages(book)) if repeated is None else repeated)
    report = AuditReport(source=book.source, sections=len(book.sections), blocks=len(book.blocks),
                         blocks_unpunctuated=unpunctuated, code_blocks=code_block_count(book),
                         rules=[n for n, _ in rules], counts=counts, defects=defects, quality=quality,
                         section_quality=per_section)
    report.summary = summary_lines(report, book)
    return report


def summary_lines(report: AuditReport, book: AuditBook) -> list[str]:
    section_keys = Counter(title_key(s.title) for s in book.sections)
    repeated_titles = sum(1 for n in section_keys.values() if n > 1)
    share = 100 * report.blocks_unpunctuated / report.blocks if report.blocks else 0.0
    lines = [f"{repeated_titles} section titles occur more than once",
             f"{report.blocks_unpunctuated} of {report.blocks} heading-delimited blocks ({share:.0f}%) end without "
             f"closing punctuation",
             f"{report.code_blocks} fenced code blocks"]
    section_ids = {s.id for s in book.sections}
    flawed = {d.section_id for d in report.defects if d.section_id in section_ids}
    lines.append(f"{len(flawed)} of {report.sections} sections have at least one defect")
    return lines


def parse_rule_list(text: str | None) -> list[str] | None:
    return [name.strip() for name in text.split(",") if name.strip()] if text else None


def parse_fail_on(text: str | None) -> tuple[list[str], list[Threshold]]:
    """`--fail-on`: a comma list of rule names and quality thresholds (NAME>VALUE, NAME<VALUE)."""
    rules, thresholds = [], []
    for item in parse_rule_list(text) or []:
        if item in RULE_NAMES:
            rules.append(item)
        elif "<" in item or ">" in item:
            thresholds.append(parse_threshold(item))
        else:
            raise UsageError(f"--fail-on: unknown rule {item!r} (rules: {', '.join(RULE_NAMES)}; or NAME>VALUE, "
                             f"NAME<VALUE on a figure: {', '.join(FIGURES)})")
    return rules, thresholds


def gate(report: AuditReport, fail_on: str | None) -> list[str]:
    """What the `--fail-on` string gates on and the book fails, as text ('truncated 2', 'distinct_2 0.42 < 0.5');
    non-empty: exit 3."""
    rules, thresholds = parse_fail_on(fail_on)
    failing = [f"{name} {report.counts[name]}" for name in rules if report.counts.get(name, 0) > 0]
    return failing + [text for threshold in thresholds if (text := threshold.failure(report.quality))]


def audit_path(source: Path) -> Path:
    return source / "audit.json" if source.is_dir() else source.with_suffix(".audit.json")


def audit_table(report: AuditReport) -> Table:
    """The readable table: one row a rule, its count and the first defect's evidence."""
    from rich.table import Table

    table = Table(title=f"audit: {report.source}", header_style="bold")
    table.add_column("rule")
    table.add_column("defects", justify="right")
    table.add_column("first example")
    for name in report.rules:
        first = next((d for d in report.defects if d.rule == name), None)
        example = f"{first.section_id} {first.title!r}: {first.detail}" if first else ""
        table.add_row(name, str(report.counts[name]), example[:100])
    table.caption = "; ".join(report.summary)
    return table
