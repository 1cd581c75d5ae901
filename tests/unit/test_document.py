"""pipeline/document.py: which `# ` heading is a document's title, and what is a comment rather than text."""

from __future__ import annotations

import pytest

from pipeline.document import block_tokens, title_index, top_headings, without_comments


def title_of(markdown: str) -> str | None:
    tokens = block_tokens(markdown)
    index = title_index(tokens, top_headings(tokens))
    return None if index is None else tokens[index + 1].content


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        ("# Book\n\n## Part\n\ntext\n", "Book"),
        ("# Book\n\nBy someone.\n\n# Part I\n\n## Chapter\n\n# Part II\n\n## Chapter\n", "Book"),
        ("# Version 1.2.0\n\n## Language\n\n- a\n\n# Version 1.1.0\n\n## Language\n\n- b\n", None),
        ("# Version 1.77.2 (2024-04-09)\n\nOne fix.\n\n# Version 1.77.1 (2024-03-28)\n\n## Cargo\n\n- c\n", None),
        ("# Part 1\n\n# Part 2\n\n## Chapter\n", None),
        ("## No title here\n\ntext\n", None),
        ("```\n# not a heading\n```\n\n# Real\n", "Real"),
    ],
)
def test_the_title_heading(markdown, title):
    assert title_of(markdown) == title


def test_comment_blocks_are_blanked_and_line_numbers_kept():
    markdown = "# T\n\n<!-- YAML\nadded: v1\n-->\n\nText <!-- inline --> here.\n\n```\n<!-- code -->\n```\n"
    blanked = without_comments(markdown)
    assert blanked.count("\n") == markdown.count("\n")
    assert "YAML" not in blanked and "<!-- inline -->" in blanked and "<!-- code -->" in blanked
