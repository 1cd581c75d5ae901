"""The planner: BookSpec -> Outline, level by level, every request of a level at once (seed 003 §8).

One request for the book title and part titles; one per part for its chapter titles; one per chapter for
its section titles. The shape is enforced exactly: JSON-schema constrained output where every engine has
it, else parse and repair. A node whose answer is invalid, short, or repeats a title already taken
(case- and whitespace-insensitive, within its parent and across the book) is asked again with the taken
titles shown, up to `plan_attempts` times; what is still missing then is filled with a numbered title and
counted as a placeholder. Model output is untrusted: bad JSON never raises.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio

from pipeline.backends.pool import BackendPool, RequestFailed
from pipeline.errors import FanoutError
from pipeline.prompts import render
from pipeline.records import BookSpec, ChatRequest, Chapter, Outline, Part, Section
from pipeline.titles import clean_title, plausible_title, title_key

PLAN_MAX_TOKENS = 1024
REASK_TEMPERATURES = (0.4, 0.7, 0.7)  # a re-ask at temperature 0 tends to repeat the refused answer


@dataclass
class PlanStats:
    requests: int = 0
    reasked: int = 0
    placeholders: int = 0
    seconds: float = 0.0
    levels: list[int] = field(default_factory=list)  # requests per level: 1 -> P -> P*C


def find_json(text: str) -> Any:
    """The first JSON object or array in the text (fences and chatter around it are ignored), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def parse_titles(text: str, key: str) -> list[str]:
    """Titles from an answer: {key: [...]}, any list in an object, a bare list, or failing JSON, list lines."""
    value = find_json(text)
    items: list[Any] = []
    if isinstance(value, dict):
        items = value.get(key) if isinstance(value.get(key), list) else next(
            (v for v in value.values() if isinstance(v, list)), [])
    elif isinstance(value, list):
        items = value
    else:
        items = [line for line in text.splitlines() if re.match(r"\s*(?:[-*•]|\d+[.)])\s+\S", line)]
    return [title for title in map(clean_title, items) if len(title) >= 2]


def parse_book_title(text: str) -> str:
    value = find_json(text)
    return clean_title(value.get("title", "")) if isinstance(value, dict) else ""


def spare(count: int) -> int:
    """Extra titles a schema allows beyond the count, so duplicates can be dropped without a re-ask."""
    return count // 4 + 1


def titles_schema(key: str, count: int, with_title: bool = False) -> dict[str, Any]:
    array = {"type": "array", "minItems": count, "maxItems": count + spare(count),
             "items": {"type": "string", "minLength": 3, "maxLength": 100}}
    properties: dict[str, Any] = {key: array}
    if with_title:
        properties = {"title": {"type": "string", "minLength": 3, "maxLength": 100}, **properties}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-style body field that constrains an answer to a JSON schema."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def taken_note(taken: list[str]) -> str:
    if not taken:
        return ""
    shown = "; ".join(f'"{t}"' for t in taken[-60:])
    return f"\nThese titles are already taken; do not use any of them or anything close: {shown}."


class Planner:
    def __init__(self, pool: BackendPool, spec: BookSpec, json_schema: bool, extra: dict[str, Any],
                 on_node: Callable[[str], None] | None = None):
        self.pool = pool
        self.on_node = on_node or (lambda level: None)
        self.spec = spec
        self.json_schema = json_schema
        self.extra = extra
        self.stats = PlanStats()
        self.book_keys: dict[str, set[str]] = {"parts": set(), "chapters": set(), "sections": set()}

    async def plan(self, outline: Outline | None = None, barrier: bool = False,
                   on_chapter: Callable[[Outline, Part, Chapter], None] | None = None,
                   on_change: Callable[[Outline], None] | None = None) -> Outline:
        """Plan what `outline` (a partial one from an interrupted run, or None) still lacks.

        Pipelined (the default): a part's chapters are asked the moment its title exists, and a chapter's
        sections the moment its title exists; `on_chapter` fires as each chapter's sections are known, so
        writing starts while the rest is still being planned. `barrier=True` waits for each whole level
        (seed 003's schedule). `on_change` sees the outline after every planned node, to save it."""
        started = time.monotonic()
        if outline is None:
            title, part_titles = await self._plan_book()
            outline = Outline(title=title, parts=[Part(id=f"p{i + 1:02d}", title=t)
                                                  for i, t in enumerate(part_titles)], complete=False)
        else:
            self._claim_existing(outline)
        self.stats.levels = [1, len(outline.parts), len(outline.parts) * self.spec.chapters]
        changed = on_change or (lambda _: None)
        changed(outline)
        chapter_done = on_chapter or (lambda outline, part, chapter: None)

        async def chapter(part: Part, ch: Chapter, announce: bool) -> None:
            if not ch.sections:
                await self._plan_chapter(outline, ch)
                changed(outline)
            if announce:
                chapter_done(outline, part, ch)

        async def part(pt: Part, group) -> None:
            if not pt.chapters:
                await self._plan_part(outline, pt)
                changed(outline)
            for ch in pt.chapters:
                group.start_soon(chapter, pt, ch, True)

        if barrier:
            await self._each([pt for pt in outline.parts if not pt.chapters], lambda pt: self._plan_part(outline, pt))
            changed(outline)
            await self._each([(pt, ch) for pt in outline.parts for ch in pt.chapters],
                             lambda pair: chapter(*pair, False))
            for pt, ch in [(pt, ch) for pt in outline.parts for ch in pt.chapters]:
                chapter_done(outline, pt, ch)
        else:
            async with anyio.create_task_group() as group:
                for pt in outline.parts:
                    group.start_soon(part, pt, group)
        outline.complete = True
        changed(outline)
        self.stats.seconds = time.monotonic() - started
        return outline

    def _claim_existing(self, outline: Outline) -> None:
        """Titles an interrupted run already planned stay taken."""
        for pt in outline.parts:
            self._claim("parts", pt.title)
            for ch in pt.chapters:
                self._claim("chapters", ch.title)
                for section in ch.sections:
                    self._claim("sections", section.title)

    @staticmethod
    async def _each(items: list, plan_one) -> None:
        async with anyio.create_task_group() as group:
            for item in items:
                group.start_soon(plan_one, item)

    async def _plan_book(self) -> tuple[str, list[str]]:
        values = {"prompt": self.spec.prompt}
        book_title = ""

        def take_title(answer: str) -> None:
            nonlocal book_title
            book_title = book_title or parse_book_title(answer)

        parts = await self._titles("plan_book.md", values, "parts", self.spec.parts, "parts", with_title=True,
                                   on_answer=take_title)
        self.on_node("parts")
        return book_title or clean_title(self.spec.prompt) or "Handbook", parts

    async def _plan_part(self, outline: Outline, part: Part) -> None:
        values = {"book_title": outline.title, "part_title": part.title}
        titles = await self._titles("plan_part.md", values, "titles", self.spec.chapters, "chapters",
                                    fallback_prefix=part.title, ancestors=[outline.title, part.title])
        part.chapters = [Chapter(id=f"{part.id}.c{i + 1:02d}", title=t) for i, t in enumerate(titles)]
        self.on_node("chapters")

    async def _plan_chapter(self, outline: Outline, chapter: Chapter) -> None:
        part = next(p for p in outline.parts if chapter.id.startswith(p.id + "."))
        values = {"book_title": outline.title, "chapter_title": chapter.title}
        titles = await self._titles("plan_chapter.md", values, "titles", self.spec.sections, "sections",
                                    fallback_prefix=chapter.title,
                                    ancestors=[outline.title, part.title, chapter.title])
        chapter.sections = [Section(id=f"{chapter.id}.s{i + 1:02d}", title=t) for i, t in enumerate(titles)]
        self.on_node("sections")

    async def _titles(self, template: str, values: dict[str, Any], key: str, count: int, level: str,
                      with_title: bool = False, on_answer=None, fallback_prefix: str = "",
                      ancestors: tuple[str, ...] | list[str] = ()) -> list[str]:
        """Ask until `count` new titles are in hand. Refused: titles taken elsewhere in the book at this
        level, and titles that repeat the node's own ancestors (a chapter named like its part)."""
        chosen: list[str] = []
        refused: list[str] = []
        ancestor_keys = {title_key(title) for title in ancestors}
        for attempt in range(self.spec.plan_attempts):
            need = count - len(chosen)
            prompt = render(template, **{**values, "count": need, "taken": taken_note(chosen + refused)})
            answer = await self._ask(prompt, titles_schema(key, need, with_title), self._temperature(attempt))
            if on_answer is not None:
                on_answer(answer)
            for title in parse_titles(answer, key):
                if len(chosen) == count:
                    break
                if not plausible_title(title):
                    continue
                fresh = title_key(title) not in ancestor_keys and self._claim(level, title)
                (chosen if fresh else refused).append(title)
            if len(chosen) == count:
                return chosen
            self.stats.reasked += 1
        return chosen + self._placeholders(level, fallback_prefix, count, len(chosen))

    def _claim(self, level: str, title: str) -> bool:
        """Take a title for the book if nobody has it yet (the event loop makes this atomic)."""
        key = title_key(title)
        if key in self.book_keys[level]:
            return False
        self.book_keys[level].add(key)
        return True

    def _placeholders(self, level: str, prefix: str, count: int, have: int) -> list[str]:
        noun = level[:-1].capitalize()
        titles = []
        for number in range(have + 1, count + 1):
            title = f"{prefix} ({noun.lower()} {number})" if prefix else f"{noun} {number}"
            while not self._claim(level, title):
                title += "'"
            titles.append(title)
        self.stats.placeholders += len(titles)
        return titles

    def _temperature(self, attempt: int) -> float:
        if attempt == 0:
            return self.spec.temperature
        return max(self.spec.temperature, REASK_TEMPERATURES[min(attempt, len(REASK_TEMPERATURES)) - 1])

    async def _ask(self, prompt: str, schema: dict[str, Any], temperature: float) -> str:
        extra = dict(self.extra)
        if self.json_schema:
            extra["response_format"] = response_format("titles", schema)
        request = ChatRequest(messages=[{"role": "user", "content": prompt}], max_tokens=PLAN_MAX_TOKENS,
                              temperature=temperature, extra=extra, tag="plan")
        self.stats.requests += 1
        try:
            return (await self.pool.complete(request, first=True)).text
        except RequestFailed as failure:
            raise FanoutError(f"planning failed: {failure}") from None
