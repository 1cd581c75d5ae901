"""A section's citations as printed: its markers [n] renumbered by place in the order first cited (two passages
from one place are one source), and after its text a "Sources" list of what it cites: file, heading path and page,
each the text of the user's document (escaped: source text is data, never markup). The grammar of markers and of
the list is pipeline/sources/markers.py's; book/assemble.py prints each section through `cited_body`."""

from __future__ import annotations

import re

from pipeline.records.sources import Passage
from pipeline.sources.markers import MARKER, cited_numbers, marker_numbers, outside_code, sources_list


def cited_body(text: str, passages: list[Passage]) -> str:
    """The section's text as printed: its markers renumbered by place (passages from one place are one source), in
    the order first cited, and its Sources list."""
    order = [n for n in cited_numbers(text) if 1 <= n <= len(passages)]
    if not order:
        return text
    places = list(dict.fromkeys(passages[old - 1].place() for old in order))
    new = {old: places.index(passages[old - 1].place()) + 1 for old in order}

    def renumber(match: re.Match[str]) -> str:
        numbers = sorted({new[n] for n in marker_numbers(match) if n in new})
        return "".join(f"[{n}]" for n in numbers)

    body = outside_code(text, lambda prose: MARKER.sub(renumber, prose))
    return "\n\n".join([body, sources_list(places)])
