"""The audit: find every truncated, duplicate, empty, failed or looping section of a book.

Takes an AuditBook (loaded from a run folder — spec, outline, journal and book.md — or from a bare Markdown
book, split at its headings) and returns an AuditReport: every defect names its rule, the section id and
title, and the evidence; the report also carries the book's quality figures (audit.quality). The
book is read by audit.book; the rules are audit.rules' ordered list, and the `rule` / `skip_rule` settings
choose among them. The summary counts say what they measure in words ("N section titles
occur more than once; M of K blocks (x%) end without closing punctuation").
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.audit.analysis import analyse
from pipeline.audit.book import AuditBook
from pipeline.audit.quality import FIGURES, Threshold, measure, parse_threshold
from pipeline.audit.rules import RULE_NAMES, RULES, choose_rules, figure_rules, find_defects, rule_repeated_passages
from pipeline.errors import UsageError
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.offrequest import open_judge
from pipeline.records.audit import AuditReport
from pipeline.text import ends_closed
from pipeline.titles import title_key

if TYPE_CHECKING:
    from rich.table import Table


# ---------------------------------------------------------------- report


def audit(
    book: AuditBook,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    embedder: Embedder | None = None,
    judge: str = "minilm",
) -> AuditReport:
    """Every chosen rule's defects and the book's figures, by words and by meaning (`embedder`: the static
    model unless another is given; `judge`: the off-request judge's setting, pipeline/meaning/offrequest.py)."""
    rules = choose_rules(only, skip)
    meaning = analyse(book, embedder or open_embedder(), open_judge(judge) if book.prompt else None)
    defects = find_defects(book, meaning, rules)
    counts = {name: sum(d.rule == name for d in defects) for name in rules}
    unpunctuated = sum(not ends_closed(block) for block in book.blocks)
    repeated = counts.get("repeated_passages")
    quality, per_section = measure(
        book,
        book.title,
        book.prompt,
        book.target_words,
        len(rule_repeated_passages(book)) if repeated is None else repeated,
        meaning,
    )
    figures = [name for name in figure_rules(book) if name in rules]
    report = AuditReport(
        source=book.source,
        sections=len(book.sections),
        blocks=len(book.blocks),
        blocks_unpunctuated=unpunctuated,
        code_blocks=book.structure.code_blocks,
        rules=rules,
        counts=counts,
        author=book.author,
        figure_rules=figures,
        figure_why={name: RULES[name].why for name in figures},
        structure=book.structure,
        defects=defects,
        quality=quality,
        section_quality=per_section,
        meaning=meaning,
    )
    report.summary = summary_lines(report, book)
    return report


def summary_lines(report: AuditReport, book: AuditBook) -> list[str]:
    section_keys = Counter(title_key(s.title) for s in book.sections)
    repeated_titles = sum(1 for n in section_keys.values() if n > 1)
    share = 100 * report.blocks_unpunctuated / report.blocks if report.blocks else 0.0
    lines = [
        f"{repeated_titles} section titles occur more than once",
        f"{report.blocks_unpunctuated} of {report.blocks} heading-delimited blocks ({share:.0f}%) end without "
        f"closing punctuation",
        f"{report.code_blocks} fenced code blocks",
    ]
    section_ids = {s.id for s in book.sections}
    defects = [d for d in report.defects if d.section_id in section_ids and d.rule not in report.figure_rules]
    lines.append(f"{len({d.section_id for d in defects})} of {report.sections} sections have at least one defect")
    lines += [
        f"{name}: {report.counts[name]} (a figure in a {report.author} author's book: {report.figure_why[name]})"
        for name in report.figure_rules
        if report.counts[name]
    ]
    return lines


def flagged(report: AuditReport) -> list[str]:
    """What the audit flags as defects, rule by rule in words ('11 sections with a word a handbook would not print'),
    then the parts and chapters off the request: the run's last line. Figures are not named."""
    said = []
    for name in report.rules:
        if name in report.figure_rules:
            continue
        items = len({d.section_id for d in report.defects if d.rule == name})
        said += [RULES[name].says(items)] if items else []
    off = report.meaning.off_request_ids if report.meaning is not None else []
    levels = Counter("part" if "." not in node_id else "chapter" for node_id in off)
    said += [f"{n} {level}{'' if n == 1 else 's'} off the request" for level, n in sorted(levels.items(), reverse=True)]
    return said


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
            raise UsageError(
                f"setting 'fail_on': unknown rule {item!r} (rules: {', '.join(RULE_NAMES)}; "
                f"or NAME>VALUE, NAME<VALUE on a figure: {', '.join(FIGURES)})"
            )
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
        count = f"{report.counts[name]} (figure)" if name in report.figure_rules else str(report.counts[name])
        table.add_row(name, count, example[:100])
    table.caption = "; ".join(([report.structure.line()] if report.structure else []) + report.summary)
    return table
