"""What the FAKE engines know of fanout's prompts: which request is planning (and at which level, for how
many items), which is a section (and its title), and the answers a well-behaved model gives to each."""

from __future__ import annotations

import json
import re
import zlib
from functools import cache

COUNT = re.compile(r"\blist (\d+) (?:part|chapter|section)s?\b", re.I)
SECTION = re.compile(r'^Write the section "(.+?)"(?: of this book on .+?)?\. It explains', re.M)
POINT = re.compile(r"^Write the section .+?\. It explains: (.+)$", re.M)
PHRASE = re.compile(
    r"(?:The book's title is|Its part made of .+ is titled|Its chapter about .+ is titled"
    r"|the section about .+ is titled):$"
)


def plan_level(prompt: str) -> str | None:
    """book, part or chapter for a planning prompt; None for anything else."""
    if prompt.startswith("Plan a book"):
        return "book"
    if prompt.startswith("List ") and 'for the part "' in prompt:
        return "part"
    if prompt.startswith("List ") and 'for the chapter "' in prompt:
        return "chapter"
    return None


def phrase_level(prompt: str) -> str | None:
    """title, part, chapter or section for a prompt that asks to phrase one given unit (templates/phrase_*.md);
    None for anything else."""
    if PHRASE.search(prompt.strip()) is None:
        return None
    last = prompt.strip().splitlines()[-1]
    if last.endswith("The book's title is:"):
        return "title"
    return "part" if "Its part made of" in last else "chapter" if "Its chapter about" in last else "section"


def phrase_answer(title: str) -> str:
    """A phrased unit as a well-behaved model gives it: one `Title: point` line."""
    return f"{title}: {fake_point(title)}"


def requested_count(prompt: str) -> int:
    return int(COUNT.search(prompt).group(1))


def section_point(prompt: str) -> str:
    match = POINT.search(prompt)
    return match.group(1) if match else ""


def section_title(prompt: str) -> str | None:
    match = SECTION.search(prompt)
    return match.group(1) if match else None


def fake_point(title: str) -> str:
    """A key point for a FAKE title: two more distinct words, so that no point restates its title or
    another's (the planner refuses both, by meaning)."""
    seed = zlib.crc32(title.encode())
    return f"How it meets {fake_word(seed % 997)} and {fake_word(seed // 997 % 997)}."


def plan_answer(level: str, titles: list[str], book_title: str = "The Fake Handbook") -> str:
    """A numbered list of `Heading: point` lines, after a title line for the book."""
    lines = [f"{number}. {title}: {fake_point(title)}" for number, title in enumerate(titles, 1)]
    return "\n".join(([f"Title: {book_title}"] if level == "book" else []) + lines)


FAKE_WORD_LIMIT = 0.45  # no two FAKE words nearer than this, so no two FAKE titles say the same thing


@cache
def fake_words() -> list[str]:
    """Real words (whole-word ASCII tokens of the meaning model's own vocabulary, six letters or more, English
    by the planner's own test, no stopwords, book words or JSON words, one a stem), each far in meaning from
    every one before it: FAKE titles made of them are distinct to the planner's checks by words and by
    meaning, as real titles should be."""
    from pipeline.meaning.embed import TOKENIZER_FILE, open_embedder, wordllama_folder
    from pipeline.titles import GENERIC_WORDS, JSON_WORDS, STOPWORDS, content_words, non_words

    vocabulary = json.loads((wordllama_folder() / TOKENIZER_FILE).read_text())["model"]["vocab"]
    skip = STOPWORDS | GENERIC_WORDS | JSON_WORDS
    words = {t[1:] for t in vocabulary if t.startswith("▁") and t[1:].isascii() and t[1:].isalpha() and len(t) > 6}
    english = sorted(word for word in words - skip if word.islower() and not non_words(word))
    by_stem = {content_words(word): word for word in english}
    candidates = sorted(word for stem, word in by_stem.items() if stem)  # one word a stem: no two titles echo
    vectors = open_embedder().embed(candidates)
    near = (vectors @ vectors.T) >= FAKE_WORD_LIMIT
    taken = near[0] & False
    picked = []
    for index in range(len(candidates)):
        if not taken[index]:
            picked.append(candidates[index])
            taken |= near[index]
    return picked


def fake_title(number: int, stretch: str = "") -> str:
    """The number-th FAKE title: one distinct word, capitalised. Engines planning one book take their words
    from stretches of their own (named by any string), so their titles never meet."""
    return fake_word(number + zlib.crc32(stretch.encode()) % FAKE_STRETCHES * FAKE_STRETCH).capitalize()


FAKE_STRETCHES, FAKE_STRETCH = 12, 200


def fake_word(number: int) -> str:
    """The number-th FAKE word (wrapping round past the last)."""
    words = fake_words()
    return words[number % len(words)]


def letters(number: int) -> str:
    """A distinct word for each number (1 -> 'b', 27 -> 'bb'): numbered titles would be near-duplicates,
    since numbers are not content words."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word = "abcdefghijklmnopqrstuvwxyz"[digit] + word
        if number == 0:
            return word
