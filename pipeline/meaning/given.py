"""What the plan gives: what a book's nodes are about before the model phrases them (given_book -> GivenBook; the
phrasing is pipeline/book/plan/phrasing.py's), read without a model from the request's concerns and the
facets a book of its kind covers (templates/facets.toml), laid out on the book's shape, from the request as read
(pipeline/meaning/reading.py's Reading: its subject, its kind, its concerns): for each level the plan gives, what each
part, chapter and section is about (a facet such as "getting started", a concern the request names, or a group of
them), with spares to ask when one cannot be phrased; or None when the shape is larger than what can be given (then
the model plans it, open). The layout, from the top:
- A request that names concerns: each one a chapter, after the kind's first facet, and the kind's other facets
  fill the chapters left (a facet one of the concerns already carries by its words is left out); past as many
  concerns as chapters, they are grouped in order, a chapter a group and a section each; past as many as
  sections, a section holds several.
- Otherwise the kind's facets are the chapters and their own facets the sections; parts are the chapters in
  order, grouped by the shape. A book with more chapters than facets takes the facets as its parts and their
  own facets as its chapters, and plans its sections open; one with more parts than facets is planned open.
A level whose every node cannot be given as many children as the shape asks is planned open below it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache

from pipeline.meaning.framing import BookKind
from pipeline.meaning.reading import Reading
from pipeline.templating import template_path
from pipeline.text import joined
from pipeline.titles import content_words

CONCERN = "concern"  # the table of facets for a chapter made from a concern the request names


@dataclass(frozen=True)
class Given:
    """One given node as the plan gives it: what it is about, and what its children are about (those past the shape's
    count are spares; none: its children are planned open)."""

    about: str
    children: tuple[Given, ...] = ()
    from_request: bool = False  # a concern the request names (or a group of them), not a facet of the kind


@dataclass
class GivenBook:
    """The parts as given, each with its chapters (and theirs), the chapters to ask when one cannot be phrased
    (taken once each, book-wide), and the levels given (the rest are planned open)."""

    parts: tuple[Given, ...]
    spare_chapters: list[Given] = field(default_factory=list)
    levels: tuple[str, ...] = ("parts", "chapters", "sections")

    def gives(self, level: str) -> bool:
        return level in self.levels

    spares: tuple[Given, ...] = ()  # every spare chapter, those taken too

    def __post_init__(self) -> None:
        self.spares = tuple(self.spare_chapters)

    def spare_chapter(self) -> Given | None:
        return self.spare_chapters.pop(0) if self.spare_chapters else None

    def all_chapters(self) -> tuple[Given, ...]:
        """Every chapter as given, the spares included."""
        return tuple(chapter for part in self.parts for chapter in part.children) + self.spares


@cache
def facets(kind: BookKind | str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The kind's facets in order, each with its sections' facets (templates/facets.toml)."""
    table = tomllib.loads(template_path("facets.toml").read_text(encoding="utf-8"))
    return tuple((facet, tuple(subs)) for facet, subs in table[kind].items())


def facet_nodes(kind: BookKind | str) -> list[Given]:
    return [Given(facet, tuple(Given(sub) for sub in subs)) for facet, subs in facets(kind)]


def carried_by(facet: str, concerns: list[str]) -> bool:
    """A concern of the request already says what the facet says, by its words ('staying safe', 'tool safety')."""
    words = content_words(facet)
    return any(words & content_words(concern) for concern in concerns)


def groups(items: list[str], count: int) -> list[list[str]]:
    """The items in `count` consecutive groups as even as can be (the request's order kept)."""
    size, extra = divmod(len(items), count)
    out, at = [], 0
    for number in range(count):
        take = size + (number < extra)
        out.append(items[at : at + take])
        at += take
    return [group for group in out if group]


def concern_chapter(concern: str) -> Given:
    """A chapter made from one concern: its sections are the concern table's facets."""
    return Given(concern, tuple(Given(sub) for _, subs in facets(CONCERN) for sub in subs), from_request=True)


def grouped_chapter(concerns: list[str], sections: int) -> Given:
    """A chapter made from several concerns: a section each, then the concern table's facets for the rest."""
    own = [Given(concern, from_request=True) for concern in concerns]
    extra = [Given(sub) for _, subs in facets(CONCERN) for sub in subs]
    return Given(joined(concerns), tuple(own + extra[: max(sections - len(own), 0) + 2]), from_request=True)


def chapter_items(reading: Reading, chapters: int, sections: int) -> list[Given]:
    """The chapters as given (spares after the first `chapters`), or [] when they cannot be given."""
    concerns = list(reading.concerns)
    kind_facets = facet_nodes(reading.kind)
    if not concerns:
        return kind_facets
    if len(concerns) <= chapters:
        rest = [facet for facet in kind_facets[1:] if not carried_by(facet.about, concerns)]
        return [kind_facets[0], *map(concern_chapter, concerns), *rest]
    if len(concerns) <= chapters * sections:
        return [grouped_chapter(group, sections) for group in groups(concerns, chapters)]
    section_groups = [joined(group) for group in groups(concerns, chapters * sections)]
    return [grouped_chapter(group, sections) for group in groups(section_groups, chapters)]


def part_of(chapters: list[Given]) -> Given:
    return Given("the chapters on " + joined([chapter.about for chapter in chapters]), tuple(chapters))


def given_book(reading: Reading, parts: int, chapters: int, sections: int) -> GivenBook | None:
    """The book's nodes as given for this shape (module docstring), or None when the model must plan it open."""
    items = chapter_items(reading, parts * chapters, sections)
    if len(items) >= parts * chapters:
        used, spares = items[: parts * chapters], items[parts * chapters :]
        part_nodes = [part_of(used[at * chapters : (at + 1) * chapters]) for at in range(parts)]
        levels: tuple[str, ...] = (
            ("parts", "chapters", "sections") if all_have(used, sections) else ("parts", "chapters")
        )
        return GivenBook(tuple(part_nodes), list(spares), levels)
    kind_facets = facet_nodes(reading.kind)
    if reading.concerns or len(kind_facets) < parts:
        return None
    levels = ("parts", "chapters") if all_have(kind_facets[:parts], chapters) else ("parts",)
    return GivenBook(tuple(kind_facets[:parts]), [], levels)


def all_have(nodes: list[Given], count: int) -> bool:
    return all(len(node.children) >= count for node in nodes)
