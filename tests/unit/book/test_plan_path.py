"""One node's path through book/plan/, told by the code: the planning of one chapter's sections (an outline whole but
for them, planned open and planned from what is given) is traced with sys.setprofile, and every call into a module of
plan/ is read with the modules of plan/ on its stack (a coroutine's frames chain through the awaits that resumed it).
No module may be entered again while it is on the stack below another one (a callback back up the path), the path
is at most MAX_MODULES modules, in every schedule; docs/layout.md shows the path this test writes for the pipelined
schedule (a line a module: the modules of plan/ it calls; both in alphabetical order).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pipeline.backends.pool import BackendPool
from pipeline.book.plan.planner import Planner, PlanOptions
from pipeline.records import Backend, BookSpec, Chapter, Outline, Part, PlanMode, PlanSchedule, Section
from tests.fakes.fake_engine import FakeEngine
from tests.unit.book.test_plan_assemble import GREEDY, ScriptedPlanner

pytestmark = pytest.mark.anyio

PLAN = Path(__file__).resolve().parents[3] / "pipeline" / "book" / "plan"
LAYOUT = Path(__file__).resolve().parents[3] / "docs" / "layout.md"
MAX_MODULES = 8
REQUEST = "Write a short handbook on keeping a sourdough starter alive. Practical, with examples."


@pytest.fixture
def anyio_backend():
    return "asyncio"


class PathTrace:
    """The modules of plan/ each call met on its stack, outermost first, a module's frames in a row counted once."""

    def __init__(self) -> None:
        self.order: list[str] = []  # modules in the order first entered
        self.edges: dict[str, list[str]] = {}  # caller -> callees, in the order first called
        self.again: set[tuple[str, ...]] = set()  # stacks on which a module stands twice

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(str(PLAN)):
            return
        stack = stack_of(frame)
        if len(set(stack)) < len(stack):
            self.again.add(stack)
        for caller, callee in zip((None, *stack), stack):
            if callee not in self.order:
                self.order.append(callee)
            if caller is not None and callee not in self.edges.setdefault(caller, []):
                self.edges[caller].append(callee)

    def path(self) -> str:
        """The modules as a graph, a line a module and the modules it calls, each in alphabetical order (the order
        they are first entered in depends on when the samples land)."""
        return "\n".join(f"{module} -> {', '.join(sorted(self.edges[module]))}" for module in sorted(self.edges))


def stack_of(frame: FrameType | None) -> tuple[str, ...]:
    modules: list[str] = []
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(str(PLAN)):
            module = Path(name).stem
            if not modules or modules[-1] != module:
                modules.append(module)
        frame = frame.f_back
    return tuple(reversed(modules))


@contextmanager
def traced() -> Iterator[PathTrace]:
    trace = PathTrace()
    sys.setprofile(trace)
    try:
        yield trace
    finally:
        sys.setprofile(None)


def whole_but_one_chapter(*, given: bool) -> Outline:
    """A 2x2x2 outline whose last chapter has no sections yet (`given`: its units carry what they were phrased
    from, as a given plan's do)."""
    about = {"about": "feeding"} if given else {}
    parts = []
    for p in (1, 2):
        chapters = []
        for c in (1, 2):
            node = f"p{p:02d}.c{c:02d}"
            sections = [] if (p, c) == (2, 2) else [
                Section(id=f"{node}.s{s:02d}", title=f"Kept {p}{c}{s}", point="A point.", **about) for s in (1, 2)
            ]  # fmt: skip
            chapters.append(Chapter(id=node, title=f"Chapter {p}{c}", point="A point.", sections=sections, **about))
        parts.append(Part(id=f"p{p:02d}", title=f"Part {p}", point="A point.", chapters=chapters, **about))
    return Outline(title="Sourdough Starters", parts=parts, complete=False)


def ignore(*args: object, **known: object) -> None:
    """The stage's callbacks (pipeline/book/planstage.py's), which are not the planner's."""


async def one_node_path(mode: PlanMode, schedule: PlanSchedule) -> PathTrace:
    engine = await FakeEngine(reply=ScriptedPlanner({})).start()
    try:
        pool = BackendPool([Backend(name="fake", base_url=engine.url, cap=8)])
        spec = BookSpec(prompt=REQUEST, parts=2, chapters=2, sections=2)
        planner = Planner(pool, spec, GREEDY, on_node=ignore, options=PlanOptions(mode=mode))
        partial = whole_but_one_chapter(given=mode is PlanMode.GIVEN)
        with traced() as trace:
            outline = await planner.plan(partial, schedule=schedule, on_section=ignore, on_change=ignore)
        assert len(outline.parts[1].chapters[1].sections) == 2, "the chapter was planned"
        return trace
    finally:
        await engine.stop()


@pytest.mark.parametrize("mode", [PlanMode.OPEN, PlanMode.GIVEN])
@pytest.mark.parametrize("schedule", list(PlanSchedule))
async def test_one_nodes_path_enters_no_module_twice(mode, schedule):
    trace = await one_node_path(mode, schedule)
    assert not trace.again, "a module entered again below another: " + "; ".join(" > ".join(s) for s in trace.again)
    assert len(trace.order) <= MAX_MODULES, trace.order
    if schedule is PlanSchedule.PIPELINED:  # the default schedule's path is the one docs/layout.md shows
        assert trace.path() in LAYOUT.read_text(encoding="utf-8"), f"docs/layout.md shows the path:\n{trace.path()}"
