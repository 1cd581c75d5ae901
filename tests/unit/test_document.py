"""pipeline/document.py: which `# ` heading is a document's title, and what is a comment rather than text."""

from __future__ import annotations

import pytest

from pipeline.document import block_tokens, title_index, top_headings, without_silent_markup


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
    blanked = without_silent_markup(markdown)
    assert blanked.count("\n") == markdown.count("\n")
    assert "YAML" not in blanked and "<!-- inline -->" in blanked and "<!-- code -->" in blanked


def test_empty_anchors_are_blanked_outside_code_and_inside_text_kept():
    markdown = (
        '# T\n\n<a id="1.95-Language"></a>\n\nLanguage\n--------\n\n- item <a id="in-a-list"></a>\n\n'
        'Text.\n<a name="glued"></a>\n\n```\n<a id="in-code"></a>\n```\n\nSee <a id="inline"></a> here.\n'
    )
    blanked = without_silent_markup(markdown)
    assert blanked.count("\n") == markdown.count("\n")
    assert "1.95-Language" not in blanked and "glued" not in blanked
    assert all(kept in blanked for kept in ("in-a-list", "in-code", "inline"))
    headings = [t.content for t in block_tokens(blanked) if t.type == "inline" and t.map and t.map[0] == 4]
    assert headings == ["Language"]
