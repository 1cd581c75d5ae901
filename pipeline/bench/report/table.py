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


def pair(a: float | None, b: float | None) -> str:
    return "n/a" if a is None and b is None else f"{num(a)} / {num(b)}"


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)
