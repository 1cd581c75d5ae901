"""Titles made by a model: cleaned for use, keyed for comparison, and checked for words that are not words.

wordfreq 3.1.1 (PyPI) says whether a word is English: its large English list (about 320,000 words from
Wikipedia, subtitles, books, the web and more, inside the wheel: nothing is downloaded) holds 'sourdough',
'qubits', 'polders' and 'systemd', and not a small model's coinages ('Lifeguising', 'LifeGuns', 'Lifegangs').
A word of the request is a word of the book whatever the list says ('argparse' in a handbook on it).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Collection
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from pipeline.text import stem

MAX_TITLE_CHARS = 120
NUMBERING = re.compile(
    r"^(?:(?i:part|chapter|section)\s+(?:\d+|[IVXLC]+)[.):\-]*\s*"  # Part 3: / Chapter IV.
    r"|\d+\.\d+(?:\.\d+)*[.):\-]?\s+"  # 1.2 Title / 1.2. Title
    r"|(?:\d+|[IVXLC]+)[.):\-]\s+)"
)  # 1. / 2) / IV:


# A re-ask shows refused titles with their reasons in brackets; a small model copies a bracket back:
# "The One You'll Never Know (repeats)".
# "The Basics\" (says nothing of its own)": the words are those of the reasons a refusal gives.
NOTE_ECHO = re.compile(
    r"[\s\"“”]*\([^()]*\b(?:repeats?|refused|already|chosen|elsewhere|title|says|nothing|own|example|covers|"
    r"leaves|request|usable|sentence|identifier|number|word)\b[^()]*\)\s*$",
    re.I,
)


def clean_title(raw: Any) -> str:
    """One title from whatever the model gave: no Markdown marks, numbering, quotes or line breaks."""
    if isinstance(raw, dict):
        raw = raw.get("title") or next((v for v in raw.values() if isinstance(v, str)), "")
    if not isinstance(raw, str):
        return ""
    spans = re.split(r"(`[^`\n]+`)", raw)  # a code span is kept whole, marks and all ('`Box<T>`', '`page_title`')
    text = "".join(piece if at % 2 else without_marks(piece) for at, piece in enumerate(spans))
    text = " ".join(text.split()).strip(" \"'“”‘’-–—:;,.")
    text = NUMBERING.sub("", text).strip(" \"'“”-–—:")
    text = NOTE_ECHO.sub("", text).strip(" \"'“”")
    if len(text) > MAX_TITLE_CHARS:
        text = text[:MAX_TITLE_CHARS].rsplit(" ", 1)[0]
    return text


def without_marks(text: str) -> str:
    """Text without Markdown's marks: headings, emphasis (an underscore inside a word, 'page_title', is the
    word's), stray backticks, quotes, links' brackets and braces."""
    return re.sub(r"[#*`>\[\]{}]|(?<!\w)_+|_+(?!\w)", "", text)


def folded(text: str) -> str:
    """The text lower-cased with its accents taken off ('Café' -> 'cafe'): a model writes a word both ways."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))


@lru_cache(maxsize=16_384)
def title_key(title: str) -> str:
    """What makes two titles the same: case, accents, whitespace, Markdown marks and edge punctuation do not
    count. Kept for the last 16,384 titles: the audit compares each title with many others."""
    return " ".join(re.sub(r"[#*_`]", "", folded(title)).split()).strip(" .,:;!?")


MAX_PLAUSIBLE_CHARS = 90


def plausible_title(title: str) -> bool:
    """A usable title: not too short or long, not a phrase looping on itself, and not one saying itself again
    past a colon or dash ('Sourdough: Sourdough'); small models do both."""
    key = title_key(title)
    words = re.findall(r"\w[\w'’]*", key)  # a colon or comma does not hide a loop ('the Book: the Book')
    if not 2 <= len(title) <= MAX_PLAUSIBLE_CHARS or not words:
        return False
    runs = [tuple(words[i : i + LOOP_RUN]) for i in range(len(words) - LOOP_RUN + 1)]
    head, *tail = SUBTITLE.split(key, maxsplit=1)
    return len(runs) == len(set(runs)) and tail != [head]


LOOP_RUN = 4  # a run of this many words twice in a title is a loop ('go go go go go'); 'the Balance of' twice is not
SUBTITLE = re.compile(r"\s*:\s+|\s+[-–—]\s+")  # where a title's subtitle starts ('Borrowing: Banks and Bonds')


# ---------------------------------------------------------------- what makes a title unusable
# Small models echo their parent's title, emit JSON keys or identifiers as titles, and number near-copies
# ("Starter Sourcing 2"). These checks say why a title is refused, so the re-ask can say it too.

STOPWORDS = frozenset(
    """
a an the of and or to in on for with from by at as into about your you yours our my their its it this that
these those how what why when where which who is are be can do does should will vs versus without within own
""".split()
)
GENERIC_WORDS = frozenset(
    """
introduction overview basics basic guide handbook book chapter part section tips essentials essential
fundamentals fundamental understanding key concepts concept principles principle short complete practical
examples example beginner beginners beginner's write writing topic topics summary conclusion more
""".split()
)
JSON_WORDS = frozenset(
    """
title titles parts part chapters chapter sections section point points name description content type id
string array object null true false json key value items list
""".split()
)
SIMILAR = 0.75  # Jaccard of content words at or above which two titles say the same thing
MISSPELT_FROM, MISSPELT_RATIO = 6, 0.8  # 'baramet' ~ 'baromet' 0.86; 'could' ~ 'cloud' is too short to try
MAX_HEADING_WORDS = 10  # past this a 'title' is a sentence (small models write their point into it)
MAX_TITLE_CASE_WORDS = 16  # ... unless it is in title case: a textbook's headings run longer
CODE_MARKS = re.compile(r"[{}\[\]<>=|\\]|::|\(\)")
MIN_WORDS_BESIDE_CODE = 1  # a title with code marks and fewer content words of its own than this is code
COUNTED = re.compile(r"\((?:part|chapter|section|topic|item)?\s*\d+\)\s*$", re.I)


def title_words(title: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", folded(title))


@lru_cache(maxsize=65536)
def content_words(title: str) -> frozenset[str]:
    """The words that carry a title's meaning, stemmed ('Making Starters' = 'make starter'): no stopwords, no
    generic book words, no numbers."""
    words = [w for w in title_words(title) if w not in STOPWORDS and w not in GENERIC_WORDS and not w.isdigit()]
    return frozenset(stem(word) for word in words)


def borrows_from(title: str, vocabulary: frozenset[str]) -> bool:
    """The title uses a word of `vocabulary` (stems), or a misspelling of a long one ('Barameter')."""
    words = content_words(title)
    if words & vocabulary:
        return True
    long_words = [v for v in vocabulary if len(v) >= MISSPELT_FROM]
    return any(
        SequenceMatcher(None, word, known).ratio() >= MISSPELT_RATIO
        for word in words
        if len(word) >= MISSPELT_FROM
        for known in long_words
    )


def similarity(a: str, b: str) -> float:
    """Jaccard of two titles' content words (0 when either has none)."""
    return jaccard(content_words(a), content_words(b))


def jaccard(left: Collection[str], right: Collection[str]) -> float:
    """The share of two sets' words they have in common (0 when either is empty)."""
    left, right = set(left), set(right)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def echoes(title: str, ancestor: str) -> bool:
    """The title says what its ancestor (parent, book title, the user's request) already says."""
    return title_key(title) == title_key(ancestor) or similarity(title, ancestor) >= SIMILAR


def same_title(a: str, b: str) -> bool:
    return title_key(a) == title_key(b)


def near_duplicates(a: str, b: str) -> bool:
    return title_key(a) == title_key(b) or similarity(a, b) >= SIMILAR


class TitleIndex:
    """Titles indexed by their words, so that a near-duplicate (its words overlap another's by SIMILAR, Jaccard) is
    found without comparing every pair (1,536 sections would be over a million comparisons on the event loop): a
    title whose words overlap another's n words by SIMILAR must share one of any n - ceil(SIMILAR * n) + 1 of them,
    so only the titles holding one of its rarest words are compared. The planner's words are content words (the
    default); the audit's near_duplicate rule reads every word (text.words_of). The one near-duplicate test."""

    def __init__(self, words: Callable[[str], Collection[str]] = content_words) -> None:
        self.words = words
        self.titles: list[str] = []
        self.postings: dict[str, list[int]] = {}

    def add(self, title: str) -> None:
        for word in set(self.words(title)):
            self.postings.setdefault(word, []).append(len(self.titles))
        self.titles.append(title)

    def near(self, title: str) -> str | None:
        """The earliest title that nearly repeats `title` (the same title included), or None."""
        found = self.near_index(title, same=True)
        return None if found is None else self.titles[found]

    def near_index(self, title: str, *, same: bool) -> int | None:
        """The index of the earliest title whose words overlap `title`'s by SIMILAR or more; `same`: one with the
        same key counts whatever its words, else it is passed over."""
        mine = set(self.words(title))
        words = sorted(mine, key=lambda word: (len(self.postings.get(word, ())), word))
        prefix = words[: len(words) - math.ceil(SIMILAR * len(words)) + 1]
        for index in sorted({i for word in prefix for i in self.postings.get(word, ())}):
            other = self.titles[index]
            if title_key(title) == title_key(other):
                if same:
                    return index
            elif jaccard(mine, self.words(other)) >= SIMILAR:
                return index
        return None


def looks_like_identifier(title: str) -> bool:
    """A JSON key, a camelCase or snake_case name, or code: what a confused model puts where a title goes.
    Product names stay titles: 'JavaScript' and 'PostgreSQL' have one hump, 'contentTypeId' has two from
    a lowercase start."""
    stripped = title.strip()
    if title_key(stripped) in JSON_WORDS:
        return True
    if not re.sub(r"`[^`]+`", "", stripped).strip(" ,.:;-–—?!") or " " in stripped:
        # a heading that sets its code as code ('`reactive()`'), or names code among words of its own ('Using
        # Box<T> to Point to Data'), is a heading
        bare = re.sub(r"`[^`]+`", " code ", stripped)
        plain = [w for w in bare.split() if not CODE_MARKS.search(w) and re.fullmatch(r"[\w'’,.?!:;-]+", w)]
        return len(content_words(" ".join(plain))) < MIN_WORDS_BESIDE_CODE and bool(CODE_MARKS.search(bare))
    if CODE_MARKS.search(stripped):
        return True
    humps = len(re.findall(r"[a-z][A-Z]", stripped))
    return "_" in stripped or humps >= 3 or (humps >= 2 and stripped[:1].islower())


def is_counted(title: str) -> bool:
    """Ends in a count in brackets ('Feeding (section 3)'): a near-copy told apart by a number. A plain
    trailing number is left alone ('Python 3', 'World War II'): numbers are not content words, so
    'Starter Sourcing 2' beside 'Starter Sourcing' is caught as a repeat anyway."""
    return bool(COUNTED.search(title))


ACRONYM = re.compile(r"^[A-Z]{2,6}s?$")  # 'HTTP', 'GPUs': read as letters, not as a word


@lru_cache(maxsize=65536)
def is_english(word: str) -> bool:
    """The word is in wordfreq's English list (any frequency)."""
    from wordfreq import zipf_frequency  # 0.4 s to load its list: only once a title is checked

    return zipf_frequency(word, "en") > 0


COMMON_ZIPF = 5.0  # 'work', 'home', 'night', 'check': on their own, words too everyday to head a section


def is_common(word: str) -> bool:
    """An everyday word (wordfreq's Zipf frequency of at least COMMON_ZIPF: once in every 100,000 words)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word.casefold(), "en") >= COMMON_ZIPF


def non_words(title: str, known: str = "") -> list[str]:
    """The words of a title that are neither English nor words of `known` (the request, the titles above it):
    'Lifeguns' in 'LifeGuns of the Sea'. Numbers, acronyms and a known word's other endings ('Starters' for
    'starter') are words. The planner asks it of a small model's lines only: a capable model's rare words are a
    trade's ('rustup', 'octatonic', 'OpenTelemetry': pipeline/book/plan/policy.py)."""
    known_stems = {stem(word) for word in title_words(known)}
    odd = []
    for word in re.findall(r"[^\W\d_]+", title):
        if len(word) < 3 or ACRONYM.match(word) or stem(word.casefold()) in known_stems:
            continue
        if not is_english(word.casefold()):
            odd.append(word)
    return odd
