"""Title words and keys: content words, echoes, near duplicates, identifiers, non-words, the title index, usable
titles (good writing's pass)."""

import pytest

from pipeline.bench.studies.corpus import book_outline, load_corpus
from pipeline.titles import (
    TitleIndex,
    borrows_from,
    clean_title,
    content_words,
    echoes,
    looks_like_identifier,
    near_duplicates,
    non_words,
    plausible_title,
    title_key,
)


def test_content_words_drop_stopwords_generic_words_and_numbers():
    assert content_words("The Basics of Feeding Your Starters, Part 2") == {"feed", "starter"}, "stemmed"


def test_echo_and_near_duplicate_are_symmetric_jaccard_on_content_words():
    assert echoes("Feeding a Starter", "Starter Feeding") and near_duplicates("Starter Feeding", "Feeding a Starter")
    assert not echoes("Feeding Schedule", "Starter Feeding")
    assert not looks_like_identifier("Hand Tools")


@pytest.mark.parametrize(
    "raw, title",
    [
        ("The One You'll Never Know (repeats)", "The One You'll Never Know"),
        ('Feeding Times (nearly repeats "Feeding")', "Feeding Times"),
        ("Python 3 (and 2)", "Python 3 (and 2)"),
        ('The Basics" (says nothing of its own)', "The Basics"),
        ("Brakes (Rim and Disc)", "Brakes (Rim and Disc)"),
    ],
)
def test_a_bracket_copied_from_the_re_ask_note_is_cleaned_off(raw, title):
    assert clean_title(raw) == title


def test_a_title_borrowing_from_the_example_is_caught_even_misspelt():
    example = content_words("The Barometer") | content_words("Clouds and Fronts")
    assert borrows_from("The Barameter", example) and borrows_from("Reading Clouds", example)
    assert not borrows_from("What Could Go Wrong", example), "short words are not matched loosely"
    assert not borrows_from("Vaccine Safety", example)


def test_the_title_index_finds_what_comparing_every_pair_finds():
    titles = ["Making a Sourdough", "Feeding Times", "Storing It Cold", "Baking Day", "Rye Flour Starters"]
    index = TitleIndex()
    for title in titles:
        index.add(title)
    for probe in ["How to Make Sourdough", "Feeding Time", "Cold Storage", "Starters of Rye Flour", "Oven Heat"]:
        by_pairs = next((t for t in titles if near_duplicates(probe, t)), None)
        assert index.near(probe) == by_pairs, probe


@pytest.mark.parametrize(
    "title, known, odd",
    [
        ("LifeGuns and Lifegangs", "", ["LifeGuns", "Lifegangs"]),
        ("Qubits, Polders and Sourdough", "", []),  # rare, but English words
        ("Parsing Flags with Argparse", "a handbook on argparse", []),  # a word of the request is the book's
        ("Argparse Subparsers", "a handbook on Python tools", ["Argparse", "Subparsers"]),
        ("HTTP Caching in 2024", "", []),  # acronyms and numbers
        ("Feeding Starters", "keeping a sourdough starter alive", []),
    ],
)
def test_words_that_are_not_words_are_found_unless_the_request_uses_them(title, known, odd):
    assert non_words(title, known) == odd


def test_a_title_written_with_and_without_its_accents_is_one_title():
    assert title_key("The Repair Café") == title_key("the repair cafe")
    assert echoes("The Repair Cafe", "The Repair Café"), "a section titled as its chapter, but for an accent"


@pytest.mark.parametrize(
    "title",
    [
        "The Ultimate Chicken Book: The Ultimate Chicken Book",  # a small model's, seen in a PDF
        "Sourdough: Sourdough",
        "Sourdough — sourdough.",
        "Policy #1: Policy #1",
        "go go go go go",
        "The Basics of the Book, the Basics of the Book",
    ],
)
def test_a_title_saying_itself_again_is_not_usable(title):
    assert not plausible_title(title)


def test_every_title_of_the_good_writing_corpus_with_a_subtitle_is_usable():
    titles = [
        node.title
        for book in load_corpus()
        for part in book_outline(book).parts
        for node in (part, *part.chapters, *(s for c in part.chapters for s in c.sections))
    ]
    subtitled = [title for title in titles if ":" in title or " - " in title or " — " in title]
    assert len(subtitled) > 100 and all(plausible_title(title) for title in subtitled)
