"""The request's asks carried down the plan: which of them one node's children must still carry, which a
taken child takes along for its own children, and when a section that carries none is refused (what a node still
owes when its rounds are spent is phrased by the model, planner.py).
"""

from __future__ import annotations

import math

from pipeline.book.plan.answers import PlanItem
from pipeline.book.plan.policy import Verdict, leaves_out
from pipeline.meaning.embed import Embedder
from pipeline.meaning.nearness import carries, unit


class Coverage:
    """The asks of the request that one node's children must carry. Above the sections, nothing is refused
    for them: each child takes along, for its own children, an even share of the asks still open (the
    nearest it), the last child all that are left. Among sections, the last slots are kept for them: once
    as few slots are left as asks are open, an item that carries none is refused. (Taking along only what
    the children after it could not hold, one per child, sent 14 of a brief's 19 asks to its first chapter
    of four sections, and 16 of them were carried nowhere.)"""

    def __init__(self, embedder: Embedder, musts: list[str], *, leaf: bool) -> None:
        self.embedder = embedder
        self.open = musts
        self.leaf = leaf

    def carried(self, item: PlanItem) -> list[str]:
        text = unit(item.title, item.point)
        return [ask for ask in self.open if carries(self.embedder, ask, [text])]

    def refusal(self, item: PlanItem, slots_left: int) -> Verdict | None:
        if not self.leaf or not self.open or slots_left > len(self.open) or self.carried(item):
            return None
        return leaves_out(self.open)

    def take(self, item: PlanItem, slots_after: int) -> list[str]:
        """Mark what the taken item carries; return the asks it takes along for its children."""
        for ask in self.carried(item):
            self.open.remove(ask)
        if self.leaf or not self.open:
            return []
        share = math.ceil(len(self.open) / (slots_after + 1))
        text = self.embedder.embed([unit(item.title, item.point)])[0]
        nearest = sorted(self.open, key=lambda ask: -float(self.embedder.embed([ask])[0] @ text))[:share]
        self.open = [ask for ask in self.open if ask not in nearest]
        return nearest
