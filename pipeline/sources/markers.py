"""Citation markers and a section's Sources list: the one grammar the writer (pipeline/book/cite.py) prints and the
audit (pipeline/audit/citations.py) reads.

A marker is [n], [n, m] or [n; m] in prose (not in code spans or fences; not a link's text `[n](…)` or a link
definition `[n]:`); [n][m] is two. A printed section ends with its Sources list: a paragraph "Sources:" and
an ordered list, entry n naming where passage n comes from (Passage.where), escaped so that a user's file and
heading names print as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.text import code_spans, split_code

MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?![(:])")
SPACED_MARKER = re.compile(r"([ \t]*)" + MARKER.pattern)  # with the space before it, which goes when it goes
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")
ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
SOURCES_LABEL = "Sources:"
SOURCES_LIST = re.compile(r"\n\nSources:\n\n((?:\d+\. .*(?:\n|$))+)\s*\Z")
ENTRY = re.compile(r"^(\d+)\. (.*)$", re.M)


def marker_numbers(match: re.Match[str]) -> list[int]:
    return [int(n) for n in re.split(r"\s*[,;]\s*", match.group(match.re.groups))]


def cited_numbers(text: str) -> list[int]:
    """The numbers the text's markers name, in the order first cited."""
    found = [n for prose in split_code(text) for match in MARKER.finditer(prose) for n in marker_numbers(match)]
    return list(dict.fromkeys(found))


def outside_code(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the text between code spans and fences (pipeline/text.py's code_spans: ``` and ~~~
    fences), the code left as it is."""
    pieces, at = [], 0
    for start, end in code_spans(text):
        pieces += [change(text[at:start]), text[start:end]]
        at = end
    pieces.append(change(text[at:]))
    return "".join(pieces)


def without_markers(text: str) -> str:
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(MARKER.sub("", text).split()))


def escaped(text: str) -> str:
    """Text of a user's document as Markdown that prints it as it is."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def sources_list(wheres: list[str]) -> str:
    """The Sources list a printed section ends with (after a blank line), entry n naming source n."""
    entries = [f"{at}. {escaped(where)}" for at, where in enumerate(wheres, 1)]
    return "\n\n".join([SOURCES_LABEL, "\n".join(entries)])


def split_sources_list(text: str) -> tuple[str, list[str]]:
    """A printed section's text without its Sources list, and the list's entries (where each source is), in order;
    the text whole and [] when it ends with none."""
    found = SOURCES_LIST.search(text)
    if found is None:
        return text, []
    entries = {int(n): ESCAPED.sub(r"\1", where).strip() for n, where in ENTRY.findall(found.group(1))}
    return text[: found.start()].rstrip(), [entries[n] for n in sorted(entries)]
