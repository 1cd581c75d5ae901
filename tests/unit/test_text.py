"""pipeline/text.py's shared helpers, and the differences between their callers that stay keyword arguments."""

from __future__ import annotations

from pipeline.sources.markers import cited_numbers, outside_code
from pipeline.text import (
    as_title,
    close_open_fence,
    code_spans,
    ends_on_abbreviation,
    ends_on_whole_item,
    fenced_blocks,
    joined,
    list_item,
    prose_lines,
    prose_sentences,
    sentence_ends,
    sentences,
    split_code,
    stem,
    title_case,
    whole_sentences,
    without_open_fence,
)

TILDE_BLOCK = "Feed it daily [1].\n\n~~~python\nstarter[3] = flour\n~~~\n\nKeep it warm [2]."


# ---------------------------------------------------------------- code fences


def test_a_tilde_fence_is_code_and_its_brackets_are_no_citation() -> None:
    assert cited_numbers(TILDE_BLOCK) == [1, 2]
    assert "starter[3]" not in "".join(split_code(TILDE_BLOCK))
    upper = "FEED IT DAILY [1].\n\n~~~python\nstarter[3] = flour\n~~~\n\nKEEP IT WARM [2]."
    assert outside_code(TILDE_BLOCK, str.upper) == upper


def test_a_fence_closes_only_on_its_own_character_at_least_as_long() -> None:
    text = "~~~~\n```\nstill code\n~~~\nstill code\n~~~~\nprose"
    (block,) = fenced_blocks(text)
    assert block.closed and text[block.end :] == "\nprose"
    assert [line for _, line in prose_lines(text)] == ["prose"]
    assert close_open_fence("````\ncode\n```") == "````\ncode\n```\n````", "three backticks do not close four"


def test_a_fence_line_with_words_after_it_does_not_close_the_block() -> None:
    text = "```\ncode\n``` not a close\nmore"
    assert not fenced_blocks(text)[0].closed
    assert close_open_fence(text).endswith("\n```")


def test_backticks_with_a_backtick_after_them_are_a_code_span_not_a_fence() -> None:
    text = "```x``` and [1]\nprose [2]"
    assert fenced_blocks(text) == []
    assert cited_numbers(text) == [1, 2]


def test_code_spans_are_fenced_blocks_and_inline_spans_in_order() -> None:
    text = "Use `ls` [1].\n```\n`not a span` [2]\n```\nThen `pwd`."
    spans = [text[start:end] for start, end in code_spans(text)]
    assert spans == ["`ls`", "```\n`not a span` [2]\n```", "`pwd`"]


def test_an_open_fence_and_what_follows_it_is_cut_whole() -> None:
    assert without_open_fence("One.\n\n~~~\ncode cut") == "One.\n\n"
    assert without_open_fence("One.\n~~~\ncode\n~~~\n") == "One.\n~~~\ncode\n~~~\n"


# ---------------------------------------------------------------- sentences


def test_where_a_sentence_ends_is_a_keyword_of_its_caller() -> None:
    text = 'One thing. two things\nthree (e.g. four). 5 is a number. "Quoted" here. Done.'
    cut = ["One thing.", "two things\nthree (e.g.", "four).", "5 is a number.", '"Quoted" here.', "Done."]
    assert sentences(text) == cut
    assert sentences(text, starts="capital") == [" ".join(cut[:3]), *cut[3:]], "e.g. and a lower case word run on"
    assert sentences(text, starts="letter") == [" ".join(cut[:5]), cut[5]], "a digit or a quote starts none"
    lines = "A line\nanother. And\n\na paragraph"
    assert sentences(lines, lines="every") == ["A line", "another.", "And", "a paragraph"]
    assert sentences(lines, lines="blank") == ["A line\nanother.", "And", "a paragraph"]
    assert sentences("Ends on a stop. ") == ["Ends on a stop.", ""], "blank pieces stay, as re.split leaves them"


def test_one_capital_initial_ends_a_sentence_only_where_the_caller_says() -> None:
    assert ends_on_abbreviation("J.", initial=True) and not ends_on_abbreviation("vitamin C.")
    assert ends_on_abbreviation("the U.S.") and ends_on_abbreviation("tools, etc.") and ends_on_abbreviation("cf.")
    assert not ends_on_abbreviation("the end.")


def test_a_request_is_read_in_whole_sentences() -> None:
    request = "A textbook on U.S. history for Dr. Smith.\nit covers wars. Also trade."
    assert whole_sentences(request) == ["A textbook on U.S. history for Dr. Smith. it covers wars.", "Also trade."]


def test_the_writer_cuts_after_a_stop_and_its_closing_marks_but_not_an_initial() -> None:
    text = 'He said "stop." Then J. Smith left'
    assert [text[:end] for end in sentence_ends(text)] == ['He said "stop."']


def test_a_planted_sentence_is_prose_of_three_words_or_more() -> None:
    text = (
        "- A list item. Not one.\n\n```\nCode here.\n```\n\nA prose sentence here. Two words. 3 rows. Then more here."
    )
    assert prose_sentences(text) == ["A prose sentence here.", "Two words. 3 rows.", "Then more here."]


# ---------------------------------------------------------------- list items, titles, names, stems


def test_a_list_item_is_commonmarks_unless_the_caller_reads_more() -> None:
    assert list_item("2) Feeding") == "Feeding" and list_item("   - Feeding ") == "Feeding"
    assert list_item("    - Nested") is None and list_item("    - Nested", nested=True) == "Nested"
    assert list_item("1: Feeding") is None and list_item("  1: Feeding", loose=True) == "Feeding"
    assert list_item("• Feeding", loose=True) == "Feeding" and list_item("-") is None


def test_a_text_may_end_on_a_whole_list_item_without_a_stop() -> None:
    assert ends_on_whole_item("Bring:\n\n- A jar\n- Flour and water")
    assert not ends_on_whole_item("Bring:\n\n- A jar\n- Flour and")
    assert not ends_on_whole_item("Bring:\n\n- A jar,") and not ends_on_whole_item("Just prose")


def test_the_title_case_test_allows_more_small_words_than_fanout_makes() -> None:
    assert title_case("Cooking from Scratch") and title_case("C++ and the STL") and not title_case("Cooking is fun")
    assert as_title("cooking from scratch") == "Cooking From Scratch"
    assert as_title("keeping bees and how they swarm") == "Keeping Bees and how They Swarm"
    assert as_title("the HTTP guide") == "The HTTP Guide", "a word that does not start in lower case stays"


def test_names_are_joined_with_commas_and_and() -> None:
    assert [joined(items) for items in (["A"], ["A", "B"], ["A", "B", "C"])] == ["A", "A and B", "A, B and C"]


def test_stems_are_english_snowball_stems() -> None:
    assert [stem(word) for word in ("starters", "feeding", "feeds")] == ["starter", "feed", "feed"]
