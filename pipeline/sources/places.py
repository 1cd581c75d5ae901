"""What the planner sees of the user's sources (PlanSources): the topics they hold near a node, for the book's and
each part's planning prompt ("The user's sources cover: ..."), so the outline covers the material; and the places a
planned node's nearest passages are from (Passage.place), kept in the outline (Node.places, shown and edited in
outline.md), so that a section is given passages from those places (pipeline/book/cite.py)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.records.sources import Query
from pipeline.sources.index import SourceIndex

SOURCE_PASSAGES = 5  # passages a node's places are drawn from; a section is given at most this many
TOPIC_PASSAGES = 24  # passages a planning prompt's note on the sources is drawn from
TOPICS = 12  # headings it names at most


@dataclass(frozen=True)
class PlanSources:
    """What the planner sees of the sources: the topics they hold for a node (their headings nearest it, for the
    book's and the parts' prompts), and the places that support a planned node (kept in the outline)."""

    index: SourceIndex
    request: str

    def note(self, focus: str, above: str = "") -> str:
        """'\nThe sources cover: Rye; Water hardness; ...' for a planning prompt ("" when they hold nothing
        near)."""
        hits = self.index.search(Query(focus or self.request, above, self.request), TOPIC_PASSAGES)
        topics = [hit.passage.headings[-1] if hit.passage.headings else hit.passage.file for hit in hits]
        shown = list(dict.fromkeys(" ".join(topic.split()) for topic in topics if topic.strip()))[:TOPICS]
        return f"\nThe user's sources cover: {'; '.join(shown)}." if shown else ""

    def places(self, title: str, above: str) -> list[str]:
        """Where the passages nearest a node are from (Passage.place), nearest first."""
        hits = self.index.search(Query(title, above, self.request), SOURCE_PASSAGES)
        return list(dict.fromkeys(hit.passage.place() for hit in hits))
