"""The book's appendix: the run's stats.json and audit.json as HTML tables.

`appendix_html(stats, audit)` takes the two records as loaded JSON (either may be None) and returns the
appendix HTML ("" when both are None): a part heading, then "Run statistics" (every key stats.json has,
lists of records as their own table) and "Audit" (`{"counts": {rule: n}, "summary": [text, ...]}`, the
quality figures as a table of their own, not the row a section; other keys are shown as they are).
Everything is escaped. Headings carry no attributes: `typeset.parts` gives them ids.
"""

from __future__ import annotations

import html
from typing import Any

MAX_COLUMNS = 4  # wider record lists are shown one small table a record
MAX_ROWS = 60  # an audit may list thousands of defects: the book shows the first ones


def _label(key: str) -> str:
    return key.replace("_", " ").strip().capitalize()


def _value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if value == value else "n/a"
    if isinstance(value, dict):
        return "; ".join(f"{_label(str(k))}: {_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _records_table(rows: list[dict]) -> str:
    """One table, a row a record; records with many fields (too wide for A5) get a small table each."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    shown, rows = rows, rows[:MAX_ROWS]
    more = f"<p>… and {len(shown) - len(rows):,} more.</p>\n" if len(shown) > len(rows) else ""
    if len(columns) > MAX_COLUMNS:
        return "".join(_record_html(row) for row in rows) + more
    head = "".join(f"<th>{html.escape(_label(str(c)))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_value(row.get(c)))}</td>" for c in columns) + "</tr>\n" for row in rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n{more}"


def _record_html(record: dict) -> str:
    rows, tables = [], []
    for key, value in record.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append(f"<h4>{html.escape(_label(str(key)))}</h4>\n{_records_table(value)}")
        else:
            rows.append(
                f"<tr><th>{html.escape(_label(str(key)))}</th>"
                f'<td class="value">{html.escape(_value(value))}</td></tr>\n'
            )
    table = f"<table>\n<tbody>\n{''.join(rows)}</tbody>\n</table>\n" if rows else ""
    return table + "".join(tables)


def _audit_html(audit: dict) -> str:
    out = []
    counts = audit.get("counts")
    listed = audit.get("figure_rules")
    figures: list = listed if isinstance(listed, list) else []
    if isinstance(counts, dict):
        if counts:
            rows = "".join(
                f'<tr><td>{html.escape(str(rule))}</td><td class="value">{html.escape(_value(n))}'
                f"{' (figure)' if rule in figures else ''}</td></tr>\n"
                for rule, n in counts.items()
            )
            out.append(
                f"<table>\n<thead><tr><th>Rule</th><th>Defects</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n"
            )
        else:
            out.append("<p>No defects found.</p>\n")
    summary = audit.get("summary")
    if isinstance(summary, list) and summary:
        out.append("<ul>\n" + "".join(f"<li>{html.escape(str(line))}</li>\n" for line in summary) + "</ul>\n")
    elif isinstance(summary, str) and summary.strip():
        out.append(f"<p>{html.escape(summary)}</p>\n")
    defects = audit.get("defects")
    if isinstance(defects, list):
        # a figure (a rule not shown to judge this kind of author) is counted above and explained in the summary
        found = [d for d in defects if not isinstance(d, dict) or d.get("rule") not in figures]
        out.append(_defects_html(found) if found else "")
    quality = audit.get("quality")
    if isinstance(quality, dict) and quality:
        out.append(_quality_html(quality))
    rest = {
        k: v
        for k, v in audit.items()
        # per-section records (section_quality, the meaning evidence) stay in audit.json: at 1,536 sections
        # the evidence alone was 775 kB of appendix tables, 300 pages; the book's figures are in `quality`
        if k not in ("counts", "summary", "source", "defects", "quality", "section_quality", "meaning", "figure_why")
    }
    if rest:
        out.append(_record_html(rest))
    return "".join(out)


def _defects_html(defects: list) -> str:
    """The first defects as a compact list: rule, where, what."""
    items = []
    for defect in defects[:MAX_ROWS]:
        if not isinstance(defect, dict):
            items.append(f"<li>{html.escape(_value(defect))}</li>\n")
            continue
        where = " ".join(str(defect[k]) for k in ("section_id", "title") if defect.get(k))
        items.append(
            f"<li><code>{html.escape(str(defect.get('rule', '?')))}</code> {html.escape(where)}"
            + (f" — {html.escape(str(defect['detail']))}" if defect.get("detail") else "")
            + "</li>\n"
        )
    more = (
        f"<p>… and {len(defects) - MAX_ROWS:,} more (audit.json has them all).</p>\n" if len(defects) > MAX_ROWS else ""
    )
    return f'<h4>Defects</h4>\n<ul class="defects">\n{"".join(items)}</ul>\n{more}'


TITLE_LISTS = {"echoing_titles": "Echoing titles", "non_word_titles": "Titles with words that are not words"}


def _quality_html(quality: dict) -> str:
    """The quality figures as a table; the titles that echo an ancestor or use a non-word as short lists."""
    out = ["<h4>Quality</h4>\n", _record_html({k: v for k, v in quality.items() if k not in TITLE_LISTS})]
    for key, heading in TITLE_LISTS.items():
        titles = quality.get(key)
        if isinstance(titles, list) and titles:
            items = "".join(f"<li>{html.escape(str(title))}</li>\n" for title in titles[:MAX_ROWS])
            more = f"<p>… and {len(titles) - MAX_ROWS:,} more.</p>\n" if len(titles) > MAX_ROWS else ""
            out.append(f"<h4>{heading}</h4>\n<ul>\n{items}</ul>\n{more}")
    return "".join(out)


def appendix_html(stats: dict | None, audit: dict | None) -> str:
    if not stats and not audit:
        return ""
    if stats and isinstance(audit, dict) and isinstance(audit.get("quality"), dict):
        stats = {k: v for k, v in stats.items() if k != "quality"}  # the audit part shows the same figures
    out = ['<section class="appendix">\n<h2>Appendix: about this book</h2>\n']
    if stats:
        out.append("<h3>Run statistics</h3>\n<p>How this book was written, from the run's stats.json.</p>\n")
        out.append(_record_html(stats))
    if audit:
        out.append("<h3>Audit</h3>\n<p>What the audit of the assembled book found (audit.json).</p>\n")
        out.append(_audit_html(audit))
    out.append("</section>\n")
    return "".join(out)
