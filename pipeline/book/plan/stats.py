"""The planner's counts (PlanStats): requests, samples, rounds, what the title policy's rules refused and held back,
keyed by the rule's id; stats.json and run.log read them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pipeline.book.plan.policy import Verdict


@dataclass
class PlanStats:
    requests: int = 0
    samples: int = 0  # answers sampled (a request with `n` gives several)
    reasked: int = 0  # nodes asked a second round
    pooled: int = 0  # distinct lines the rounds' samples gave
    taken_early: int = 0  # titles taken while their samples still streamed (asking.py's _Early)
    short: int = 0  # parts and chapters planned with fewer children than the shape asks (no usable line)
    phrased: int = 0  # given units asked to be phrased (phrasing.py)
    seconds: float = 0.0
    levels: list[int] = field(default_factory=list)  # nodes per level: 1 -> P -> P*C
    filled_from_asks: int = 0  # children phrased from the asks a node still owed, when its rounds were spent
    off_subject_taken: int = 0  # titles taken although the judge found them off the request (nothing better)
    asks_dropped: int = 0  # asks of the request no section carries after every ask
    asked_later: int = 0  # requests that failed on every backend and were asked again later in the run
    failed_requests: int = 0  # requests that failed on every backend every time (the node went on with what it had)
    refused: list[tuple[str, str, Verdict]] = field(default_factory=list)  # (node id, title, verdict), for run.log
    held_back: Counter[str] = field(default_factory=Counter)  # rule id -> lines held back for it
    caused: Counter[str] = field(default_factory=Counter)  # rule id -> second rounds asked after it took a line
    _since_round: dict[str, set[str]] = field(default_factory=dict)  # node id -> rules that took its lines

    def refuse(self, node_id: str, title: str, verdict: Verdict) -> None:
        """A line refused by a rule of the title policy."""
        self.refused.append((node_id, title, verdict))
        self._since_round.setdefault(node_id, set()).add(verdict.rule)

    def hold(self, node_id: str, verdict: Verdict) -> None:
        """A line held back by a rule of the title policy."""
        self.held_back[verdict.rule] += 1
        self._since_round.setdefault(node_id, set()).add(verdict.rule)

    def asked_again(self, node_id: str) -> None:
        """The node asks another round: each rule that refused or held back one of its lines since its last round
        had a share in the request."""
        self.caused.update(self._since_round.pop(node_id, set()))

    @property
    def refusals(self) -> Counter[str]:
        """Rule id -> lines refused by it."""
        return Counter(verdict.rule for _, _, verdict in self.refused)

    def rule_counts(self) -> dict[str, dict[str, int]]:
        """Each rule that acted: lines it refused, lines it held back, and second rounds asked after it acted."""
        refused = self.refusals
        return {
            rule: {"refused": refused[rule], "held": self.held_back[rule], "rounds": self.caused[rule]}
            for rule in sorted(set(refused) | set(self.held_back) | set(self.caused))
        }
