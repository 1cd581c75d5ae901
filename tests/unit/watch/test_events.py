"""The planning levels the watchers count: as many LevelPlanned events a level as the planner sends."""

from __future__ import annotations

from pipeline.records import BookSpec
from pipeline.watch.events import levels_planned
from pipeline.watch.live import LiveFeed
from pipeline.watch.terminal import BookProgress


def test_each_level_is_planned_once_a_node_above_it():
    spec = BookSpec(prompt="A handbook on keeping bees", parts=2, chapters=3, sections=4)
    assert levels_planned(spec) == {"parts": 1, "chapters": 2, "sections": 6}


def test_the_terminal_and_the_live_page_count_the_same_levels():
    spec = BookSpec(prompt="A handbook on keeping bees", parts=3, chapters=5, sections=2)
    page = LiveFeed("127.0.0.1", 0)
    page.planning(spec)
    bars = BookProgress(enabled=False)
    bars.planning(spec)
    assert page.state["levels"] == {"plan parts": [0, 1], "plan chapters": [0, 3], "plan sections": [0, 15]}
    assert [(task.description.strip(), task.total) for task in bars.bars.tasks] == [
        ("plan parts", 1),
        ("plan chapters", 3),
        ("plan sections", 15),
    ]
