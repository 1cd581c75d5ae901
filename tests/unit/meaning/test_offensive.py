"""Words a handbook would not print, judged in context (pipeline/meaning/offensive.py): serious writing that names
crimes, the body, history and its slurs passes; an obscenity thrown at the reader or a slur used as an insult is
caught, in the tuned sentences and the held-out ones alike (tests/fixtures/audit/offensive_context.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.bench.studies.corpus import load_corpus
from pipeline.meaning.offensive import offensive_words

CONTEXT = json.loads((Path(__file__).parents[2] / "fixtures" / "audit" / "offensive_context.json").read_text())


@pytest.mark.parametrize("kind", ["serious", "mentions"])
def test_serious_writing_passes(kind):
    flagged = [(offensive_words(text), text[:80]) for text in CONTEXT[kind] if offensive_words(text)]
    assert flagged == [], "a civics textbook's crimes, sources and quoted slurs are no defect"


@pytest.mark.parametrize("half", ["tuned", "held_out"])
def test_obscenities_and_insulting_slurs_are_caught(half):
    for kind, sentences in CONTEXT["planted"][half].items():
        missed = [text for text in sentences if not offensive_words(text)]
        assert missed == [], f"{kind} ({half})"


def test_the_good_writing_corpus_has_no_offensive_use():
    found = []
    for book in load_corpus():
        for part in book.parts:
            found += [(book.slug, part.title) for text in (part.title, part.point) if offensive_words(text)]
            for chapter in part.chapters:
                for section in chapter.sections:
                    texts = (chapter.title, chapter.point, section.title, section.point, section.text)
                    found += [(book.slug, section.title) for text in texts if offensive_words(text)]
    assert found == []


def test_a_mention_is_told_from_a_use():
    assert offensive_words("The court heard the word “shit” read aloud.") == []
    assert offensive_words("The court heard shit read aloud.") == ["shit"]
    assert offensive_words("In 1954 the government began Operation Wetback.") == []
    assert offensive_words("Operation Wetback") == ["wetback"], "in a heading every word is capitalised: no name"
    assert offensive_words("Keep the bench spic and span.") == [] and offensive_words("magna cum laude") == []
    assert offensive_words("the `fuck()` function") == [] and offensive_words("```\nshit = 1\n```") == []


def test_an_ordinary_word_is_an_insult_only_in_an_insulting_phrase():
    assert offensive_words("Salt retards fermentation; an overnight retard builds flavour.") == []
    assert offensive_words("Only a retard would skip it.") == ["only a retard"]
    assert offensive_words("If your dog is a bitch, spay her.") == []
    assert offensive_words("Son of a bitch, it failed.") == ["son of a bitch"]
    assert offensive_words("Tug Escort Rules") == [], "a harbour pilots' manual's heading"
