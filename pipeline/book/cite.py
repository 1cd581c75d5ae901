"""The writer's side of the user's sources: the passages each section is given, fitted to the engines' context,
how its prompt shows them, and what becomes of the markers [n] the model writes.

- Given: the section's passages are found by its title, its chapter's and the request (pipeline/sources/index.py),
  the best SOURCE_PASSAGES at most (pipeline/sources/places.py), in the order found, from the places its outline
  names, as many as fit the room the prompt has: the context one request may hold as the writing engines report it
  (the smallest of them; EngineInfo.context), less the answer's token cap and the rest of the prompt. Tokens are
  counted with the offline cl100k encoding (pipeline/tokens.py) times TOKENIZER_SLACK. With no engine reporting
  its context, UNKNOWN_CONTEXT is assumed.
- Shown: templates/sources.md, numbered [1]..[n], each with its file and heading path, before the section's own
  ask (a chapter's sections still share their prompt up to there).
- Markers: [n], [n, m] or [n][m] in the answer's prose (not in code) that name a passage given are kept; a number
  that names none is taken out and counted (`citations_removed`). The journal keeps the model's own numbers and
  the passages given (SectionResult.passages).

What the planner sees of the sources is pipeline/sources/places.py's; how a section's citations are printed,
pipeline/typeset/cited.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.records import Section, SectionResult
from pipeline.records.sources import Passage, Query
from pipeline.sources.index import SourceIndex
from pipeline.sources.markers import SPACED_MARKER, marker_numbers, outside_code
from pipeline.sources.places import SOURCE_PASSAGES
from pipeline.templating import render
from pipeline.tokens import offline_tokens

# an engine's tokenizer counts up to this many times cl100k's tokens of a passage: SmolLM2-135M's counted
# 1.07 times as many on average over 600 of the corpus's passages, 1.33 at the 99th percentile, 1.45 at most
TOKENIZER_SLACK = 1.35
UNKNOWN_CONTEXT = 2048  # tokens assumed when no writing engine reports its context: the embedded engine's slot
PROMPT_MARGIN = 64  # tokens kept free for the chat template's own


def prompt_tokens(text: str) -> int:
    """Tokens a text takes in an engine's prompt, at most (cl100k's count times TOKENIZER_SLACK)."""
    return int(offline_tokens(text) * TOKENIZER_SLACK) + 1


@dataclass
class Citing:
    """The passages each section is given (found once a section, kept for its retries and hedges)."""

    index: SourceIndex
    request: str
    context: int
    max_tokens: int
    chosen: dict[str, list[Passage]] = field(default_factory=dict)  # each section's passages, by its id

    def passages(self, chapter_title: str, section: Section, *, prompt: str) -> list[Passage]:
        """The section's passages that fit beside `prompt` (the whole prompt without them) and its answer: from the
        places its outline names (its `places`; from all when none of them is in the sources), nearest first."""
        if section.id not in self.chosen:
            room = self.context - self.max_tokens - prompt_tokens(prompt) - PROMPT_MARGIN
            query = Query(section.title, chapter_title, self.request)
            hits = self.index.search(query, SOURCE_PASSAGES)  # as planning found them (kept by the index)
            if section.places and not {hit.passage.place() for hit in hits} <= set(section.places):
                within = self.index.from_places(section.places) or None  # places a person chose
                hits = self.index.search(query, SOURCE_PASSAGES, within=within)
            self.chosen[section.id] = passages = fitting([hit.passage for hit in hits], room)
            if not section.places:  # the places it is written from, for outline.md (saved once it is written)
                section.places = list(dict.fromkeys(passage.place() for passage in passages))
        return self.chosen[section.id]


def fitting(passages: list[Passage], room: int) -> list[Passage]:
    """The passages, in order, while their block fits `room` tokens (as sources_tokens counts it)."""
    used, sizes = block_sizes(passages)
    count = 0
    for size in sizes:
        used += size
        if used > room:
            break
        count += 1
    return passages[:count]


def sources_tokens(passages: list[Passage]) -> int:
    """The tokens the passages' block takes at most: its own words once, then each passage's."""
    own, sizes = block_sizes(passages)
    return own + sum(sizes)


def block_sizes(passages: list[Passage]) -> tuple[int, list[int]]:
    """The tokens of the block's own words, and of each passage as it shows it."""
    own = prompt_tokens(render("sources.md", passages=""))
    return own, [prompt_tokens(shown_passage(n, passage)) for n, passage in enumerate(passages, 1)]


def shown_passage(number: int, passage: Passage) -> str:
    return f"[{number}] ({passage.place()})\n{passage.text}\n\n"


def sources_block(passages: list[Passage]) -> str:
    """The passages as the section prompt shows them (templates/sources.md), with a blank line after; "" for
    none, so a book without sources asks as before."""
    if not passages:
        return ""
    shown = "".join(shown_passage(n, passage) for n, passage in enumerate(passages, 1)).rstrip("\n")
    return render("sources.md", passages=shown) + "\n\n"


def with_citations(result: SectionResult, passages: list[Passage]) -> SectionResult:
    """The result with the passages it was given and its markers checked: those naming no passage taken out."""
    if not passages or not result.ok:
        return result.model_copy(update={"passages": passages})
    text, removed = checked_markers(result.text, len(passages))
    return result.model_copy(update={"passages": passages, "text": text, "citations_removed": removed})


def checked_markers(text: str, count: int) -> tuple[str, int]:
    """The text with every marker number outside 1..count taken out (a marker left empty goes whole), and how
    many were taken out."""
    removed = 0

    def check(match: re.Match[str]) -> str:
        nonlocal removed
        numbers = marker_numbers(match)
        kept = [n for n in numbers if 1 <= n <= count]
        removed += len(numbers) - len(kept)
        return f"{match.group(1)}[{', '.join(map(str, kept))}]" if kept else ""

    return outside_code(text, lambda prose: SPACED_MARKER.sub(check, prose)), removed
