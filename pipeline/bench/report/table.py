"""A report table (title, header, rows of text, notes naming each figure's source) and its Markdown form."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str]


def num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def kinds_note(kinds: dict[str, int]) -> str:
    """` (http_500 3, timeout 1)`: failures by kind, or nothing."""
    return f" ({', '.join(f'{kind} {count}' for kind, count in kinds.items())})" if kinds else ""


def pair(a: float | None, b: float | None) -> str:
    return "n/a" if a is None and b is None else f"{num(a)} / {num(b)}"


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)
