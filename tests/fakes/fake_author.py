"""The author FAKE: a FAKE engine that answers fanout's prompts as a capable author who knows one book of the
good-writing corpus (pipeline/bench/studies/corpus.py) would: the book's own title and parts for the book's plan,
a part's own chapters and a chapter's own sections (each `Title: point`, as the planning templates ask), and a
section's own text when it is asked to write it. With it, `fanout plan` and `fanout book` on a corpus book are
deterministic, so a change to planning shows what it does to good writing, line by line.

A planning prompt names its node by title ('for the part "…"', 'for the chapter "…"'); the author finds it in the
book by that title (the first node of the level whose title is it; else the one whose title shares most words with
it, its point breaking ties), so a title the planner changed still finds its node. Asked for more lines than the
node has, it gives the node's own lines; asked again ("Already chosen, so give others: …"), it gives the lines not
yet chosen, or all of them when every one was. Anything else (a phrasing, a retitle, a continuation) gets one
plain line. No state: every answer is a function of the book and the prompt.

Run alone (`python -m tests.fakes.fake_author BOOK.json [--port N] [--delay S]`) it prints its URL.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from pipeline.bench.studies.corpus import Book, CorpusChapter, CorpusPart, load_book
from pipeline.book.plan.prompts import CHOSEN_NOTE
from pipeline.text import sentences, without_code
from pipeline.titles import title_key, title_words
from tests.fakes.fake_engine import FakeEngine, prompt_of, serve_until_stopped
from tests.fakes.fake_prompts import phrase_level, plan_level, requested_count, section_title

NAMED = re.compile(r'for the (part|chapter) "(.+?)" of the book "')
CHOSEN = re.compile(re.escape(CHOSEN_NOTE) + r" (.+)$", re.M)
CHAPTER_OF_SECTION = re.compile(r'The chapter is "(.+?)"\.')
EXPLAINS = re.compile(r"It explains: (.+)$", re.M)
COVERS = re.compile(r"The (?:part|chapter) covers: (.+)$", re.M)


GIVEN = re.compile(r"^\[(\d+)\] \(([^\n]*)\)\n(.+?)(?=\n\n\[\d+\] \(|\n\nWrite the section|\Z)", re.M | re.S)
CITED_PASSAGES = 3  # passages a citing author writes from, at most


def given_passages(prompt: str) -> list[tuple[int, str]]:
    """(number, text) of each source passage a section prompt shows (templates/sources.md)."""
    return [(int(match.group(1)), match.group(3).strip()) for match in GIVEN.finditer(prompt)]


class AuthorReplies:
    """The answers of an author who knows `book`, as a FakeEngine's reply. Given source passages (a book with
    --sources), an author who `cites` "well" writes the section from them instead: the first two sentences of the
    prose of each of the first CITED_PASSAGES (a code block is not prose), each paragraph citing its own passage
    [n]; one who cites "wrongly" writes the same and cites the next passage given (the last cites the first);
    "never" writes its own text and cites nothing."""

    def __init__(self, book: Book, *, cites: str = "never") -> None:
        self.book = book
        self.cites = cites

    def __call__(self, body: dict) -> str:
        prompt = prompt_of(body)
        level = plan_level(prompt)
        if level is not None:
            return self.plan(level, prompt)
        title = section_title(prompt)
        if title is not None and self.cites != "never" and (passages := given_passages(prompt)):
            return self.cited_text(passages)
        if title is not None:
            return self.section_text(title, prompt)
        if "Give it a new" in prompt:
            return "Title: " + self.book.title
        if phrase_level(prompt) is not None:
            return self.phrase(prompt)
        return "That is all."

    def phrase(self, prompt: str) -> str:
        """A unit asked for by what it is about: the book's own line of that level that shares most words with
        it (the author names what the book already has), as `Title: point`."""
        asked = prompt.strip().splitlines()[-1]
        level = phrase_level(prompt)
        if level == "title":
            return f"{self.book.title}: {self.book.parts[0].point}"
        nodes: list = {"part": self.book.parts, "chapter": [c for p in self.book.parts for c in p.chapters]}.get(
            level or "", [s for p in self.book.parts for c in p.chapters for s in c.sections]
        )
        node = nearest(nodes, asked, "")
        return f"{node.title}: {node.point}"

    def plan(self, level: str, prompt: str) -> str:
        lines = [(node.title, node.point) for node in self.children(level, prompt)]
        chosen = set(chosen_titles(prompt))
        fresh = [line for line in lines if title_key(line[0]) not in chosen]
        lines = (fresh or lines)[: requested_count(prompt)]
        listed = [f"{number}. {title}: {point}" for number, (title, point) in enumerate(lines, 1)]
        return "\n".join(([f"Title: {self.book.title}"] if level == "book" else []) + listed)

    def children(self, level: str, prompt: str) -> list[CorpusPart] | list[CorpusChapter] | list:
        if level == "book":
            return self.book.parts
        match = NAMED.search(prompt)
        named = match.group(2) if match else ""
        covers = COVERS.search(prompt)
        point = covers.group(1) if covers else ""
        if level == "part":
            return nearest(self.book.parts, named, point).chapters
        chapters = [chapter for part in self.book.parts for chapter in part.chapters]
        return nearest(chapters, named, point).sections

    def section_text(self, title: str, prompt: str) -> str:
        """The text of the section the prompt names: the one with its title and key point (two chapters may share
        a title, as a logic book's 'Semantic concepts' of two languages do), else the one of its title in the
        chapter named, else the nearest by words."""
        match, explains = CHAPTER_OF_SECTION.search(prompt), EXPLAINS.search(prompt)
        chapters = [chapter for part in self.book.parts for chapter in part.chapters]
        every = [s for c in chapters for s in c.sections]
        point = explains.group(1).strip() if explains else ""
        exact = [s for s in every if title_key(s.title) == title_key(title) and s.point == point]
        if exact:
            return exact[0].text
        chapter = nearest(chapters, match.group(1) if match else "", "")
        return nearest(chapter.sections + every, title, point).text

    def cited_text(self, passages: list[tuple[int, str]]) -> str:
        """Two sentences of the prose of each of the first passages (their code left out), each citing; cut as a
        long paragraph is cut into passages (pipeline/text.py's sentences, a capital after the stop)."""
        paragraphs = []
        for number, text in passages[:CITED_PASSAGES]:
            prose = " ".join(without_code(text).split())
            if not prose:
                continue
            cited = number if self.cites == "well" else number % len(passages) + 1
            paragraphs.append(" ".join(sentences(prose, starts="capital")[:2]) + f" [{cited}]")
        return "\n\n".join(paragraphs) or "This section has nothing to say."


def nearest(nodes: list, title: str, point: str):  # type: ignore[no-untyped-def]
    """The node titled `title` with this point (a book may title two chapters alike: a logic book's 'Semantic
    concepts' of two languages), else the first titled `title`, else the one whose title (then point) shares most
    words with it."""
    key = title_key(title)
    titled = [node for node in nodes if title_key(node.title) == key]
    said = set(title_words(point))
    if titled:
        return max(titled, key=lambda node: len(said & set(title_words(node.point))))  # the first on a tie
    words = set(title_words(title))
    return max(nodes, key=lambda n: (len(words & set(title_words(n.title))), len(said & set(title_words(n.point)))))


def chosen_titles(prompt: str) -> list[str]:
    """The title keys a second round's note says are already chosen."""
    match = CHOSEN.search(prompt)
    return [title_key(title) for title in re.findall(r'"(.+?)"', match.group(1))] if match else []


def author_engine(book: Book, *, token_delay: float = 0.0, port: int = 0, cites: str = "never") -> FakeEngine:
    """A FakeEngine that answers as the author of `book`; its n > 1 choices are one answer each (an author who
    knows the book gives the same lines every time)."""
    replies = AuthorReplies(book, cites=cites)
    return FakeEngine(reply=replies, token_delay=token_delay, port=port, distinct_choices=False)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.fakes.fake_author", description=__doc__.split("\n\n")[0])
    parser.add_argument("book", type=Path, help="a corpus book (tests/fixtures/corpus/*.json)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between tokens")
    parser.add_argument("--cites", choices=["never", "well", "wrongly"], default="never", help="given sources")
    args = parser.parse_args(argv)
    engine = author_engine(load_book(args.book), port=args.port, token_delay=args.delay, cites=args.cites)
    asyncio.run(serve_until_stopped(engine))


if __name__ == "__main__":
    main()
