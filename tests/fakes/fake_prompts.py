"""What the FAKE engines know of fanout's prompts: which request is planning (and at which level, for how
many items), which is a section (and its title), and the answers a well-behaved model gives to each."""

from __future__ import annotations

import re

COUNT = re.compile(r"\blist (\d+) (?:part|chapter|section)s?\b", re.I)
SECTION = re.compile(r'^Write the section "(.+)"\. It explains', re.M)


def plan_level(prompt: str) -> str | None:
    """book, part or chapter for a planning prompt; None for anything else."""
    if prompt.startswith("Plan a book"):
        return "book"
    if prompt.startswith("List ") and 'for the part "' in prompt:
        return "part"
    if prompt.startswith("List ") and 'for the chapter "' in prompt:
        return "chapter"
    return None


def requested_count(prompt: str) -> int:
    return int(COUNT.search(prompt).group(1))


def section_title(prompt: str) -> str | None:
    match = SECTION.search(prompt)
    return match.group(1) if match else None


def plan_answer(level: str, titles: list[str], book_title: str = "The Fake Handbook") -> str:
    """A numbered list of `Heading: point` lines, after a title line for the book."""
    lines = [f"{number}. {title}: What {title.lower()} covers." for number, title in enumerate(titles, 1)]
    return "\n".join(([f"Title: {book_title}"] if level == "book" else []) + lines)


def letters(number: int) -> str:
    """A distinct word for each number (1 -> 'b', 27 -> 'bb'): numbered titles would be near-duplicates,
    since numbers are not content words."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word = "abcdefghijklmnopqrstuvwxyz"[digit] + word
        if number == 0:
            return word
