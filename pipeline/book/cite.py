"""Writing from the user's sources: the passages each section is given, how its prompt shows them, and what becomes
of the markers [n] the model writes.

- Given: the section's passages are found by its title, its chapter's and the request (pipeline/sources/index.py),
  the best SOURCE_PASSAGES at most, in the order found, as many as fit the room the prompt has: the context one
  request may hold as the writing engines report it (the smallest of them; EngineInfo.context), less the answer's
  token cap and the rest of the prompt. Tokens are counted with the offline cl100k encoding
  (pipeline/tokens.py) times TOKENIZER_SLACK. With no engine reporting its context, UNKNOWN_CONTEXT is assumed.
- Shown: templates/sources.md, numbered [1]..[n], each with its file and heading path, before the section's own
  ask (a chapter's sections still share their prompt up to there).
- Markers: [n], [n, m] or [n][m] in the answer's prose (not in code) that name a passage given are kept; a number
  that names none is taken out and counted (`citations_removed`). The journal keeps the model's own numbers and
  the passages given (SectionResult.given).
- On the page (`cited_body`): a section's markers renumbered in the order first cited, and after its text a
  "Sources" list of what it cites: file, heading path and page, each the text of the user's document (escaped:
  source text is data, never markup).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.records import Section, SectionResult
from pipeline.records.sources import Passage, Query
from pipeline.sources.index import SourceIndex
from pipeline.templating import render
from pipeline.tokens import offline_tokens

SOURCE_PASSAGES = 5  # passages a section is given at most
# an engine's tokenizer counts up to this many times cl100k's tokens of a passage: SmolLM2-135M's counted
# 1.07 times as many on average over 600 of the corpus's passages, 1.33 at the 99th percentile, 1.45 at most
TOKENIZER_SLACK = 1.35
UNKNOWN_CONTEXT = 2048  # tokens assumed when no writing engine reports its context: the embedded engine's slot
PROMPT_MARGIN = 64  # tokens kept free for the chat template's own
MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?![(\[:])")
CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")
SOURCES_HEADING = "Sources"


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
    given_to: dict[str, list[Passage]] = field(default_factory=dict)

    def given(self, chapter_title: str, section: Section, *, prompt: str) -> list[Passage]:
        """The section's passages that fit beside `prompt` (the whole prompt without them) and its answer."""
        if section.id not in self.given_to:
            room = self.context - self.max_tokens - prompt_tokens(prompt) - PROMPT_MARGIN
            hits = self.index.search(Query(section.title, chapter_title, self.request), SOURCE_PASSAGES)
            self.given_to[section.id] = fitting([hit.passage for hit in hits], room)
        return self.given_to[section.id]


def fitting(passages: list[Passage], room: int) -> list[Passage]:
    """The passages, in order, while their block fits `room` tokens."""
    kept: list[Passage] = []
    for passage in passages:
        if prompt_tokens(sources_block([*kept, passage])) > room:
            break
        kept.append(passage)
    return kept


def sources_block(passages: list[Passage]) -> str:
    """The passages as the section prompt shows them (templates/sources.md), with a blank line after; "" for
    none, so a book without sources asks as before."""
    if not passages:
        return ""
    shown = "\n\n".join(f"[{n}] ({passage.where()})\n{passage.text}" for n, passage in enumerate(passages, 1))
    return render("sources.md", passages=shown) + "\n\n"


def with_citations(result: SectionResult, given: list[Passage]) -> SectionResult:
    """The result with the passages it was given and its markers checked: those naming no passage taken out."""
    if not given or not result.ok:
        return result.model_copy(update={"given": given})
    text, removed = checked_markers(result.text, len(given))
    return result.model_copy(update={"given": given, "text": text, "citations_removed": removed})


def checked_markers(text: str, given: int) -> tuple[str, int]:
    """The text with every marker number outside 1..given taken out (a marker left empty goes whole), and how
    many were taken out."""
    removed = 0

    def check(match: re.Match[str]) -> str:
        nonlocal removed
        numbers = marker_numbers(match)
        kept = [n for n in numbers if 1 <= n <= given]
        removed += len(numbers) - len(kept)
        return f"[{', '.join(map(str, kept))}]" if kept else ""

    return _outside_code(text, lambda prose: MARKER.sub(check, prose)), removed


def cited_numbers(text: str) -> list[int]:
    """The passage numbers the text's markers name, in the order first cited."""
    found = [n for prose in CODE.split(text) for match in MARKER.finditer(prose) for n in marker_numbers(match)]
    return list(dict.fromkeys(found))


def marker_numbers(match: re.Match[str]) -> list[int]:
    return [int(n) for n in re.split(r"\s*[,;]\s*", match.group(1))]


def cited_body(text: str, given: list[Passage]) -> str:
    """The section's text as printed: its markers renumbered in the order first cited, and its Sources list."""
    order = [n for n in cited_numbers(text) if 1 <= n <= len(given)]
    if not order:
        return text
    new = {old: at for at, old in enumerate(order, 1)}

    def renumber(match: re.Match[str]) -> str:
        numbers = sorted({new[n] for n in marker_numbers(match) if n in new})
        return "".join(f"[{n}]" for n in numbers)

    body = _outside_code(text, lambda prose: MARKER.sub(renumber, prose))
    entries = [f"{at}. {escaped(given[old - 1].where())}" for old, at in new.items()]
    return "\n\n".join([body, f"{SOURCES_HEADING}:", "\n".join(entries)])


def escaped(text: str) -> str:
    """Text of a user's document as Markdown that prints it as it is."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the text between code spans and fences, the code left as it is."""
    pieces, at = [], 0
    for code in CODE.finditer(text):
        pieces += [change(text[at : code.start()]), code.group(0)]
        at = code.end()
    pieces.append(change(text[at:]))
    return "".join(pieces)
