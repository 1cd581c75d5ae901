"""Where a repair's continuation of a cut section joins it (pipeline/book/repair.py's ends_block): a paragraph of its
own after a sentence's end or a fence line of either kind, the same line after a cut sentence."""

from __future__ import annotations

import pytest

from pipeline.book.repair import ends_block


@pytest.mark.parametrize(
    ("text", "block"),
    [
        ("Feed the starter daily.", True),
        ("Is it alive?", True),
        ("A block:\n\n```\nfeed()\n```", True),
        ("A block:\n\n~~~\nfeed()\n~~~", True),
        ("A block:\n\n~~~~ python", True),
        ("Feed the starter every", False),
        ("It costs `x`", False),
        ("Use ~~~ to fence", False),
    ],
)
def test_a_continuation_starts_a_paragraph_only_after_a_whole_sentence_or_a_fence(text, block):
    assert ends_block(text) is block
