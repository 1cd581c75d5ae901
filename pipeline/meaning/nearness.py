"""Nearness by meaning of titles, points and texts: the judgements the planner, the writer and the audit share.

Each judgement is a cosine from an Embedder (embed.py) against a threshold calibrated on the labelled set in
tests/fixtures/meaning/ (`python -m pipeline.bench.studies.calibrate` prints each one's precision and recall there):
two titles that say the same thing (`title_near`), two siblings a writer cannot tell apart (`unit_near`), a vague
key point (`point_vagueness`), a line copied from a worked example (`nearest_example`), an ask a plan carries
(`carries`), and how much nearer a text is to its own unit than to its siblings' (`point_margin`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pipeline.meaning.embed import Embedder, Vectors
from pipeline.meaning.reading import request_asks
from pipeline.text import sentences
from pipeline.titles import content_words, near_duplicates

# Calibrated thresholds (tests/fixtures/meaning/; python -m pipeline.bench.studies.calibrate)
SIMILAR_TITLE = 0.63  # two titles of one level at or above this say the same thing
SIMILAR_UNIT = 0.62  # two siblings' titles and points at or above this: a writer cannot tell them apart
OFF_BOOK = 0.2  # a section below this to the request and to every heading above it is off the book
VAGUE_STOCK = 0.50  # a point this near a stock phrase says nothing of its own
VAGUE_RESTATES = 0.75  # ... nor does one this near its own title
REPEATED_PARAGRAPH = 0.65  # two paragraphs of different sections at or above this, and sharing ...
REPEATED_WORDS = 0.3  # ... this share of their content words (Jaccard), say the same thing
CARRIED = 0.60  # an ask is carried by a title or point this near it
FROM_EXAMPLE = 0.60  # a planned title and point this near a worked example's was copied from it
OVERLAPPING_UNITS = 0.60  # two chapters (or parts) whose sections, pooled, are this near cover the same ground
RESTATES = 0.5  # a sentence holding this share of the point's content words (two at least) restates it
MIN_PARAGRAPH_WORDS = 25
DIGITS = 4
STOCK_POINTS = (
    "what you need to know",
    "everything you need to know about it",
    "a simple guide for beginners",
    "how it works and how you can use it",
    "an overview of the topic",
    "the basics explained",
    "tips and tricks",
    "why it matters",
    "the most important things to know",
    "getting started",
    "an introduction to the subject",
    "all about this topic",
    "learn more about it",
)


def unit(title: str, point: str = "") -> str:
    """What a part, chapter or section promises: its title and key point."""
    return f"{title}: {point}" if point else title


# ---------------------------------------------------------------- judgements the planner shares


def says_the_same(cosine: float, first: str, second: str) -> bool:
    """Two paragraphs say the same thing: near in meaning and sharing their words. Near in meaning alone is two
    paragraphs on one subject, which a book is made of (on the good-writing corpus, 6 % of its sections have a
    paragraph at 0.80 or more to another section's; docs/planning.md, "The audit on good writing")."""
    if cosine < REPEATED_PARAGRAPH:
        return False
    a, b = content_words(first), content_words(second)
    return len(a & b) >= REPEATED_WORDS * len(a | b) > 0


def subject_words(request: str) -> frozenset[str]:
    """The content words (stems) of the request's subject: every title of the book may share them."""
    asks = request_asks(request)
    return content_words(asks[0]) if asks else frozenset()


def distinctive(title: str, subject: frozenset[str]) -> str:
    """The title without the words of the book's subject ('Using Sourdough' -> 'Using' in a sourdough book),
    what tells it from the book's other titles; the whole title when nothing else is left. Two titles that share
    only the subject say different things: judged whole, 'Using Sourdough' and 'How to Start with Sourdough'
    were one title to the static table, and the planner of a narrow request took 'Making a Lemonade' instead."""
    if not subject:
        return title
    kept = [
        word for word in re.findall(r"[\w'’-]+", title) if not (content_words(word) and content_words(word) <= subject)
    ]
    rest = " ".join(kept)
    return rest if content_words(rest) else title


def title_near(
    embedder: Embedder, title: str, others: Sequence[str], subject: frozenset[str] = frozenset()
) -> str | None:
    """The first of `others` that says what `title` says (same words, or a cosine of SIMILAR_TITLE), judged on
    what tells them from the book's subject (`distinctive`), or None."""
    if not others:
        return None
    mine, theirs = distinctive(title, subject), [distinctive(other, subject) for other in others]
    scores = embedder.embed([mine]) @ embedder.embed(theirs).T
    for other, text, score in zip(others, theirs, scores[0]):
        if score >= SIMILAR_TITLE or near_duplicates(mine, text):
            return other
    return None


def unit_near(embedder: Embedder, text: str, others: Sequence[str]) -> int | None:
    """The index of the first sibling unit (title and point) that `text` cannot be told apart from, or None."""
    if not others:
        return None
    scores = embedder.embed(list(others)) @ embedder.embed([text])[0]
    near = np.flatnonzero(scores >= SIMILAR_UNIT)
    return int(near[0]) if len(near) else None


def point_vagueness(embedder: Embedder, title: str, point: str) -> str | None:
    """Why a key point says nothing of its own, or None: it is near a stock phrase ("what you need to know"),
    or it only restates its own title ("Buying Sourdough: the importance of buying sourdough")."""
    if not point:
        return None
    vectors = embedder.embed([point, title, *STOCK_POINTS])
    to_stock = vectors[2:] @ vectors[0]
    if float(to_stock.max()) >= VAGUE_STOCK:
        return f'says nothing of its own (like "{STOCK_POINTS[int(to_stock.argmax())]}")'
    if float(vectors[0] @ vectors[1]) >= VAGUE_RESTATES:
        return "only restates its title"
    return None


def nearest_example(embedder: Embedder, text: str, examples: Sequence[str]) -> str | None:
    """The worked example's item that `text` (a title and point) was copied from, or None."""
    if not examples:
        return None
    scores = embedder.embed(list(examples)) @ embedder.embed([text])[0]
    best = int(np.argmax(scores))
    return examples[best] if scores[best] >= FROM_EXAMPLE else None


def carries(embedder: Embedder, ask: str, units: Sequence[str]) -> bool:
    """Some unit (title and point) carries the ask: holds more than half of its content words (stems: 'joints'
    in 'the strongest joint'), or is CARRIED near it by meaning."""
    if any(holds_words(ask, text) for text in units):
        return True
    if not units:
        return False
    return bool((embedder.embed(list(units)) @ embedder.embed([ask])[0]).max() >= CARRIED)


def holds_words(ask: str, text: str) -> bool:
    """The text holds more than half of the ask's content words."""
    words = content_words(ask)
    return bool(words) and 2 * len(words & content_words(text)) > len(words)


def margin_of(scores: Vectors, own: int) -> tuple[float, int]:
    """A text's cosine to its own unit (`scores[own]`) minus the nearest sibling's, and that sibling's index;
    with no sibling, its cosine to its own unit and its own index."""
    others = np.delete(scores, own)
    if not len(others):
        return float(scores[own]), own
    best = int(np.argmax(others))
    return float(scores[own] - others[best]), best + (best >= own)


def point_margin(embedder: Embedder, text: str, units: Sequence[str], own: int) -> float:
    """How much nearer the text is to its own unit (`units[own]`) than to the nearest sibling's."""
    return margin_of(embedder.embed(list(units)) @ embedder.embed([body_text(text)])[0], own)[0]


# ---------------------------------------------------------------- per section


def restating(sentence: str, point_words: frozenset[str]) -> bool:
    shared = content_words(sentence) & point_words
    return len(shared) >= 2 and len(shared) >= RESTATES * len(point_words)


def unrestated(text: str, point: str) -> str:
    """The text without the sentences that repeat the point's content words."""
    words = content_words(point)
    return " ".join(s for s in sentences(text) if not restating(s, words))


def body_text(text: str) -> str:
    """A section's prose for embedding: code blocks count as their words, headings are left out."""
    return " ".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
