"""The planner: BookSpec -> Outline (seed 003 §8), pipelined or level by level.

One request for the book title and part titles; one per part for its chapter titles; one per chapter for its
section titles. Pipelined, titles are taken from each answer as it streams, so the next level (and the
writing of a section) starts one title at a time rather than one answer at a time. The shape is enforced
exactly: JSON-schema constrained output where every engine has it, else parse and repair. A node whose
answer is invalid, short, or repeats a title already taken (case- and whitespace-insensitive, within its
parent and across the book) is asked again with the taken titles shown, up to `plan_attempts` times; what is
still missing then is filled with a numbered title and counted as a placeholder. Model output is untrusted:
bad JSON never raises.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from functools import partial
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
    cut_short: int = 0  # answers cancelled once they had given every title needed
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


class TitleStream:
    """Titles read from a JSON answer while it streams: each item of the `key` array the moment its
    closing quote arrives, so the level below can be asked before the answer ends. Anything that is not
    a plain list of strings stops the stream; the whole answer is parsed again when it ends."""

    ITEM = re.compile(r'[\s,]*("(?:[^"\\\n]|\\.)*")')
    TITLE = re.compile(r'"title"\s*:\s*("(?:[^"\\\n]|\\.)*")')

    def __init__(self, key: str, with_title: bool = False):
        self.start = re.compile(r'"%s"\s*:\s*\[' % re.escape(key))
        self.with_title = with_title
        self.text = ""
        self.position: int | None = None  # where the next item of the array starts
        self.stopped = False
        self.title = ""
        self.taken: list[str] = []  # every title handed out, to be skipped in the final parse

    def feed(self, delta: str) -> list[str]:
        self.text += delta
        if self.with_title and not self.title and (match := self.TITLE.search(self.text)):
            self.title = clean_title(json.loads(match.group(1)))
        if self.stopped:
            return []
        if self.position is None:
            if not (match := self.start.search(self.text)):
                return []
            self.position = match.end()
        items = []
        while match := self.ITEM.match(self.text, self.position):
            try:
                items.append(json.loads(match.group(1), strict=False))
            except ValueError:  # a bad escape: leave it to the final parse
                self.stopped = True
                break
            self.position = match.end()
        rest = self.text[self.position:].lstrip(" \t\r\n,")
        self.stopped = self.stopped or (bool(rest) and rest[0] != '"')
        titles = [title for title in map(clean_title, items) if len(title) >= 2]
        self.taken += titles
        return titles

    def untaken(self, titles: list[str]) -> list[str]:
        """The titles of the whole answer that the stream did not already hand out."""
        left = list(self.taken)
        fresh = []
        for title in titles:
            if title in left:
                left.remove(title)
            else:
                fresh.append(title)
        return fresh


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


OnSection = Callable[[Outline, Part, Chapter, Section], None]


def next_id(prefix: str, letter: str, taken: list) -> str:
    """The lowest free child id: a resumed chapter may hold journaled sections with gaps between them."""
    used = {node.id for node in taken}
    number = 1
    while f"{prefix}{letter}{number:02d}" in used:
        number += 1
    return f"{prefix}{letter}{number:02d}"


def id_number(node_id: str) -> int:
    return int(re.sub(r"\D", "", node_id.rsplit(".", 1)[-1]))


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
        self.book_title = ""

    async def plan(self, outline: Outline | None = None, barrier: bool = False,
                   on_section: OnSection | None = None,
                   on_change: Callable[[Outline], None] | None = None) -> Outline:
        """Plan what `outline` (a partial one from an interrupted run, or None) still lacks.

        Pipelined (the default): titles are read from each answer as it streams, so a part's chapters are
        asked the moment the part's title has arrived, a chapter's sections likewise, and `on_section`
        fires for each section the moment its title is taken (and for the sections a partial outline
        already has), so writing starts while the rest is still being planned. `barrier=True` waits for
        each whole level (seed 003's schedule) and announces every section at the end. `on_change` sees
        the outline after every planned node, to save it."""
        started = time.monotonic()
        changed = on_change or (lambda _: None)
        announce = on_section or (lambda outline, part, chapter, section: None)
        if outline is not None:
            self._claim_existing(outline)
            self.book_title = outline.title
        self.stats.levels = [1, self.spec.parts, self.spec.parts * self.spec.chapters]
        if barrier:
            outline = await self._plan_levels(outline, changed)
            for part, chapter, section in outline.sections():
                announce(outline, part, chapter, section)
        else:  # writing fills the slots meanwhile: keep one a backend for planning answers
            with self.pool.reserve_for_first():
                async with anyio.create_task_group() as group:
                    outline = await self._plan_pipelined(outline, group, announce, changed)
        outline.complete = True
        changed(outline)
        self.stats.seconds = time.monotonic() - started
        return outline

    async def _plan_levels(self, outline: Outline | None, changed) -> Outline:
        if outline is None or len(outline.parts) < self.spec.parts:
            outline = await self._plan_book(outline)
            changed(outline)
        await self._each([pt for pt in outline.parts if len(pt.chapters) < self.spec.chapters],
                         lambda pt: self._plan_part(outline, pt, changed=changed))
        await self._each([(pt, ch) for pt in outline.parts for ch in pt.chapters
                          if len(ch.sections) < self.spec.sections],
                         lambda pair: self._plan_chapter(outline, *pair, changed=changed))
        return outline

    async def _plan_pipelined(self, outline: Outline | None, group, announce: OnSection, changed) -> Outline:
        def start_chapter(book: Outline, part: Part, chapter: Chapter) -> None:
            for section in list(chapter.sections):
                announce(book, part, chapter, section)
            if len(chapter.sections) < self.spec.sections:
                group.start_soon(partial(self._plan_chapter, book, part, chapter,
                                         lambda section: announce(book, part, chapter, section), changed))

        def start_part(book: Outline, part: Part) -> None:
            for chapter in list(part.chapters):
                start_chapter(book, part, chapter)
            if len(part.chapters) < self.spec.chapters:
                group.start_soon(partial(self._plan_part, book, part,
                                         lambda chapter: start_chapter(book, part, chapter), changed))

        if outline is not None:
            for part in list(outline.parts):
                start_part(outline, part)
        if outline is None or len(outline.parts) < self.spec.parts:
            outline = await self._plan_book(outline, start_part)
            changed(outline)
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

    async def _plan_book(self, outline: Outline | None,
                         on_part: Callable[[Outline, Part], None] | None = None) -> Outline:
        """The book title and the parts still missing. Parts are added (and `on_part` told) as their titles
        stream in, once the book title, which their own prompts need, is known."""
        waiting: list[str] = []

        def add_waiting(final: bool = False) -> None:
            nonlocal outline
            if outline is None:
                if not (self.book_title or final):
                    return
                title = self.book_title or clean_title(self.spec.prompt) or "Handbook"
                outline = Outline(title=title, parts=[], complete=False)
            for title in waiting:
                part = Part(id=next_id("", "p", outline.parts), title=title)
                outline.parts.append(part)
                if on_part is not None:
                    on_part(outline, part)
            waiting.clear()

        def add(title: str) -> None:
            waiting.append(title)
            add_waiting()

        await self._titles("plan_book.md", {"prompt": self.spec.prompt}, "parts", self.spec.parts, "parts",
                           have=[part.title for part in outline.parts] if outline else [], with_title=True,
                           on_title=add)
        add_waiting(final=True)
        self.on_node("parts")
        return outline

    async def _plan_part(self, outline: Outline, part: Part, on_chapter: Callable[[Chapter], None] | None = None,
                         changed=None) -> None:
        def add(title: str) -> None:
            chapter = Chapter(id=next_id(part.id + ".", "c", part.chapters), title=title)
            part.chapters.append(chapter)
            if on_chapter is not None:
                on_chapter(chapter)

        values = {"book_title": outline.title, "part_title": part.title}
        await self._titles("plan_part.md", values, "titles", self.spec.chapters, "chapters",
                           have=[chapter.title for chapter in part.chapters], on_title=add,
                           fallback_prefix=part.title, ancestors=[outline.title, part.title])
        self.on_node("chapters")
        if changed is not None:
            changed(outline)

    async def _plan_chapter(self, outline: Outline, part: Part, chapter: Chapter,
                            on_section: Callable[[Section], None] | None = None, changed=None) -> None:
        def add(title: str) -> None:
            section = Section(id=next_id(chapter.id + ".", "s", chapter.sections), title=title)
            chapter.sections.append(section)
            chapter.sections.sort(key=lambda s: id_number(s.id))
            if on_section is not None:
                on_section(section)

        values = {"book_title": outline.title, "chapter_title": chapter.title}
        await self._titles("plan_chapter.md", values, "titles", self.spec.sections, "sections",
                           have=[section.title for section in chapter.sections], on_title=add,
                           fallback_prefix=chapter.title, ancestors=[outline.title, part.title, chapter.title])
        self.on_node("sections")
        if changed is not None:
            changed(outline)

    async def _titles(self, template: str, values: dict[str, Any], key: str, count: int, level: str,
                      have: list[str], on_title: Callable[[str], None], with_title: bool = False,
                      fallback_prefix: str = "", ancestors: tuple[str, ...] | list[str] = ()) -> None:
        """Ask until `count` titles are in hand (`have` already are), telling `on_title` of each new one as
        soon as it has streamed in. Refused: titles taken elsewhere in the book at this level, and titles
        that repeat the node's own ancestors (a chapter named like its part)."""
        chosen = list(have)
        own = {title_key(title) for title in chosen}
        refused: list[str] = []
        ancestor_keys = {title_key(title) for title in ancestors}

        def consider(title: str) -> None:
            key_of = title_key(title)
            if len(chosen) == count or not plausible_title(title) or key_of in own:
                return  # a title this node already has: a retried attempt repeating its streamed part
            if key_of not in ancestor_keys and self._claim(level, title):
                chosen.append(title)
                own.add(key_of)
                on_title(title)
            else:
                refused.append(title)

        for attempt in range(self.spec.plan_attempts):
            if len(chosen) == count:
                return
            need = count - len(chosen)
            prompt = render(template, **{**values, "count": need, "taken": taken_note(chosen + refused)})
            await self._ask(prompt, titles_schema(key, need, with_title), self._temperature(attempt),
                            key, with_title, consider, enough=lambda: len(chosen) == count)
            if len(chosen) < count:
                self.stats.reasked += 1
        for title in self._placeholders(level, fallback_prefix, count, len(chosen)):
            chosen.append(title)
            on_title(title)

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

    async def _ask(self, prompt: str, schema: dict[str, Any], temperature: float, key: str, with_title: bool,
                   consider: Callable[[str], None], enough: Callable[[], bool]) -> None:
        """One planning request; `consider` sees each title as it streams in, then those only the whole
        answer yields (a list of lines, say). Once `enough` titles are in hand the request is cancelled:
        the spare titles and the closing of the JSON would only hold a slot. A retried attempt starts a
        fresh stream; titles the cut one gave stay taken."""
        extra = dict(self.extra)
        if self.json_schema:
            extra["response_format"] = response_format("titles", schema)
        request = ChatRequest(messages=[{"role": "user", "content": prompt}], max_tokens=PLAN_MAX_TOKENS,
                              temperature=temperature, extra=extra, tag="plan")
        stream = TitleStream(key, with_title)
        scope = anyio.CancelScope()

        def on_delta(text: str) -> None:
            titles = stream.feed(text)
            self.book_title = self.book_title or stream.title
            for title in titles:
                consider(title)
            if enough() and (self.book_title or not with_title):
                scope.cancel()

        def on_retry() -> None:
            nonlocal stream
            stream = TitleStream(key, with_title)

        self.stats.requests += 1
        with scope:
            try:
                answer = (await self.pool.complete(request, on_delta, first=True, on_retry=on_retry)).text
            except RequestFailed as failure:
                raise FanoutError(f"planning failed: {failure}") from None
        if scope.cancelled_caught:
            self.stats.cut_short += 1
            return
        if with_title:
            self.book_title = self.book_title or parse_book_title(answer)
        for title in stream.untaken(parse_titles(answer, key)):
            consider(title)
