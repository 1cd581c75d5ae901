"""Words a handbook would not print: obscenities and slurs in a title, a key point or a section's text.

Found by glin-profanity 4.1.0 (MIT, a maintained word list with its own whitelist), English list, whole words
only (so 'Scunthorpe' and 'artisanal' pass, where a substring match would not). Measured on the 240 sections of
the labelled books (tests/fixtures/meaning/on_subject*.json, 1,836 sentences of titles, points and texts written
by SmolLM2-135M): 1 flagged, 'How to Suck It All', against 3 for pyobscenity (every 'artisanal') and 2 for
alt-profanity-check (a classifier of tweets: 'What to Do Before You Grow Your Own', and 'Screw the lid on tight'
at 0.82 in a spot check), which also needs scikit-learn and SciPy; better-profanity took 30 s for the same
sentences. A list has the usual blind spots both ways: a handbook on dogs or plumbing may use a listed word in its
trade sense ('bitch', 'ball cock'), and a slur it does not list passes. The planner refuses a line with such a word
(pipeline/book/plan/checks.py), the writer asks a section again (pipeline/book/write.py), and the audit reports it
(rule `offensive`). A leaf of the audit: nothing here imports the rest of fanout.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _filter() -> Any:
    from glin_profanity import Filter  # builds its word index on first use: only when a text is checked

    return Filter({"languages": ["english"], "word_boundaries": True, "ignore_words": sorted(ORDINARY_SENSE)})


# Listed words that textbooks and manuals print in their ordinary, clinical or scholarly sense: in the good-writing
# corpus (tests/fixtures/corpus/, 19 human books' section texts, paragraph by paragraph) the list found 73 words, 64
# of them these (an anthropology textbook's 'sex', 'penis', 'incest'; a history's General 'Hooker'); a harbour
# pilots' manual's 'escort' too. What stays listed is still found: 'negro', 'suck', 'wtf', 'rape', 'smut' (9 in
# the corpus), the obscenities and slurs.
ORDINARY_SENSE = frozenset(
    "sex sexes sexual sexually sexuality intercourse domination dominations erotic penis vagina clitoris anal fecal "
    "incest pornography hooker escort escorts xx".split()
)


def offensive_words(text: str) -> list[str]:
    """The listed words the text uses, each once, in the order found ([] when none)."""
    if not text.strip():
        return []
    found = _filter().check_profanity(text)
    return list(dict.fromkeys(str(word).lower() for word in found.get("profane_words") or []))
