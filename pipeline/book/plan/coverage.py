"""The request's asks carried down the plan: which of them one node's children must still carry, which a
taken child takes along for its own children, and when a section that carries none is refused (what a node still
owes when its rounds are spent is phrased by the model, asking.py).
"""

from __future__ import annotations

import math

from pipeline.book.plan.answers import PlanItem
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import carries, unit


class Coverage:
    """The asks of the request that one node's children must carry. Above the sections, nothing is refused
    for them: each child takes along, for its own children, an even share of the asks still open (the
    nearest it), the last child all that are left. Among sections, the last slots are kept for them: once
    as few slots are left as asks are open, an item that carries none is refused. (Taking along only what
    the children after it could not hold, one per child, sent 14 of a brief's 19 asks to its first chapter
    of four sections, and 16 of them were carried nowhere.)"""

    def __init__(self, embedder: Embedder, owed: list[str], *, leaf: bool) -> None:
        self.embedder = embedder
        self.owed = owed
        self.leaf = leaf

    def carried(self, item: PlanItem) -> list[str]:
        text = unit(item.title, item.point)
        return [ask for ask in self.owed if carries(self.embedder, ask, [text])]

    def owed_by(self, slots_left: int) -> list[str]:
        """The asks the next slot must carry one of: once as few section slots are left as asks are owed."""
        return list(self.owed) if self.leaf and self.owed and slots_left <= len(self.owed) else []

    def take(self, item: PlanItem, slots_after: int) -> list[str]:
        """Mark what the taken item carries; return the asks it takes along for its children."""
        for ask in self.carried(item):
            self.owed.remove(ask)
        if self.leaf or not self.owed:
            return []
        share = math.ceil(len(self.owed) / (slots_after + 1))
        text = self.embedder.embed([unit(item.title, item.point)])[0]
        nearest = sorted(self.owed, key=lambda ask: -float(self.embedder.embed([ask])[0] @ text))[:share]
        self.owed = [ask for ask in self.owed if ask not in nearest]
        return nearest
