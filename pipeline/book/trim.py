"""Starting and ending well: an answer's opening tidied, and an answer cut at the cap taken back to its last
full sentence (the cap itself is BookSpec's rule, pipeline/records/__init__.py's token_cap).

Takes the words asked for (returns the paragraph count that fits them), an answer's text
(returns it without a Markdown code fence wrapped round all of it, without the chatter or the echoed title a
small model puts before the section proper:
"Here's a sample chapter:", a quoted title line, "Section: …", and without a label line it puts after it:
"END OF THIS SECTION"), or a text that stopped at the cap (returns
it cut after its last full sentence, or None when it has none to cut back to). STORM trims unfinished
sentences the same way; the journal keeps the raw answer beside the text.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from pipeline.text import (
    FENCE,
    LOOP_REPEATS,
    closes,
    ends_closed,
    fenced_blocks,
    list_item,
    repetition_loop,
    sentence_ends,
    without_open_fence,
)

_markdown = MarkdownIt("commonmark")
WORDS_PER_PARAGRAPH = 90


CHATTER = re.compile(
    r"^(?:sure|certainly|of course|absolutely|here(?:'s| is| are)|i'm happy|i am happy|i'd be "
    r"happy|i'd love|what is your pleasure|great question)\b",
    re.I,
)
TASK_TALK = re.compile(r"^(?:you(?:'re| are) writing|you asked)\b.*:$", re.I)  # to the writer
TITLE_LINE_WORDS = 14
SENTENCE_CLOSE = re.compile(r"[.!?…]$")
INNER_SENTENCE_END = re.compile(r"[.!?…]\s")


def paragraphs_for(words: int) -> int:
    return max(1, round(words / WORDS_PER_PARAGRAPH))


def is_block(line: str) -> bool:
    """A code fence, a list item (of a list inside another too) or a table row: content, whatever it says."""
    return bool(FENCE.match(line)) or list_item(line, nested=True) is not None or line.lstrip().startswith("|")


PROSE_LABELS = frozenset({"markdown", "md", "text", "txt", "plaintext"})  # a fence's label that says it holds prose
CODE_MARKS = frozenset("{}();=<>$\\|")
PROSE_LINE_WORDS = 8  # a line of prose has at least this many words
PROSE_SHARE = 0.6  # of a block's characters, in such lines, for it to read as prose
CODE_MARK_SHARE = 0.01  # of its characters, code's marks: more, and it may be code


def reads_as_prose(block: str) -> bool:
    """Most of the block is in long lines of words, with almost none of code's marks: prose, not code."""
    characters = len(block.replace("\n", ""))
    if not characters:
        return False
    long = sum(len(line) for line in block.splitlines() if len(line.split()) >= PROSE_LINE_WORDS)
    marks = sum(block.count(mark) for mark in CODE_MARKS)
    return long / characters >= PROSE_SHARE and marks / characters <= CODE_MARK_SHARE


def unfenced(text: str) -> str:
    """An answer the model wrapped whole in a code fence, without the fence, when the fence is labelled
    Markdown or text, or has no label and holds prose: set as code, a reader would see a grey box of raw
    text and marks ('# How to Make a Sourdough', in the demo). A block with other text after it, a fence for
    code, and an unlabelled one holding code stay; a fence left open (the answer ran to the cap) is taken off
    too."""
    lines = text.strip().splitlines()
    opening = FENCE.match(lines[0]) if lines else None
    label = lines[0].strip()[len(opening.group(1)) :].strip().lower() if opening else ""
    if opening is None or (label and label not in PROSE_LABELS):
        return text
    closing = next((at for at in range(len(lines) - 1, 0, -1) if closes(lines[at], opening.group(1))), len(lines))
    if any(line.strip() for line in lines[closing + 1 :]):
        return text
    inside = "\n".join(lines[1:closing]).strip()
    return inside if label or reads_as_prose(inside) else text


def last_sentence_end(text: str) -> int | None:
    """Where the last full sentence (pipeline/text.py's sentence_ends) or closed code block ends, or None."""
    ends = sentence_ends(text) + [block.end for block in fenced_blocks(text) if block.closed]
    return max(ends, default=None)


def cut_to_sentence(text: str) -> str | None:
    """The text up to its last full sentence; None if it has none (then it stays as it is, truncated)."""
    kept = without_open_fence(text)
    end = last_sentence_end(kept)
    if end is None:
        return None
    cut = kept[:end].rstrip()
    return cut if cut and cut != text.rstrip() else None


def unmarked(line: str) -> str:
    """A line without its surrounding Markdown marks and quotes."""
    return line.strip().strip("#*_\"'“”<>«»").strip()


def is_preamble(line: str, *, has_more: bool) -> bool:
    """A first line that is not the section: chatter, or a short title-like line with text after it."""
    if is_block(line):
        return False
    bare = unmarked(line)
    if CHATTER.match(bare) and (bare.endswith((":", "!")) or len(bare.split()) <= 20):
        return True
    if TASK_TALK.match(bare):
        return True
    title_like = (
        has_more
        and bool(bare)
        and len(bare.split()) <= TITLE_LINE_WORDS
        and not INNER_SENTENCE_END.search(bare)
        and not SENTENCE_CLOSE.search(bare)
    )
    stripped = line.strip()
    marked = (
        stripped[:1] in '"“#<«'
        and stripped[-1:] in '"”#>»'
        or stripped.startswith(("#", "**"))
        or bare.lower().startswith(("section:", "chapter:", "title:"))
    )
    return title_like and (marked or ":" not in bare)


def unquoted(paragraph: str) -> str:
    """A first paragraph wrapped in quotes ('"Souring is ...' or '"... ."') without them."""
    if not paragraph.startswith(('"', "“")):
        return paragraph
    quotes = paragraph.count('"') + paragraph.count("“") + paragraph.count("”")
    if quotes == 1:
        return paragraph[1:]
    if quotes == 2 and paragraph.rstrip().endswith(('"', "”")):
        return paragraph[1:].rstrip()[:-1]
    return paragraph


def tidy_opening(text: str) -> str:
    """The answer without what a small model writes before the section itself (at most two lines)."""
    lines = text.strip().splitlines()
    for _ in range(2):
        rest = [line for line in lines[1:] if line.strip()]
        if lines and is_preamble(lines[0], has_more=bool(rest)):
            lines = "\n".join(lines[1:]).strip().splitlines()
    body = "\n".join(lines)
    first, sep, after = body.partition("\n\n")
    return unquoted(first) + sep + after


def is_trailer(line: str) -> bool:
    """A last line that is not the section: a short unpunctuated label ('END OF THIS SECTION', 'Part: What
    Comes Next') that a small model writes after it has finished."""
    if is_block(line):
        return False
    bare = unmarked(line)
    return len(bare.split()) <= TITLE_LINE_WORDS and not SENTENCE_CLOSE.search(bare)


def tidy_closing(text: str) -> str:
    """The answer without up to two trailing label lines, when the text before them ends on a full sentence,
    and without a closing double quote its last paragraph never opened."""
    lines = text.rstrip().splitlines()
    for count in (2, 1):
        before = "\n".join(lines[:-count]).rstrip()
        if before and all(is_trailer(line) for line in lines[-count:]) and ends_closed(before):
            return without_stray_quote(before)
    return without_stray_quote("\n".join(lines))


def without_stray_quote(text: str) -> str:
    """'… across many disciplines."' ending a paragraph that holds no other double quote: the quote goes."""
    last = text.rsplit("\n\n", 1)[-1]
    if text.endswith(('"', "”")) and sum(last.count(mark) for mark in '"“”') == 1:
        return text[:-1].rstrip()
    return text


def cut_at_loop(text: str, times: int, *, cut: bool) -> str | None:
    """The text up to the second copy of its earliest loop (pipeline/text.py's repetition_loop, at `times`
    copies; `cut`: the text ran to the token cap); None when it has none."""
    loop = repetition_loop(text, times, cut=cut)
    return None if loop is None else text[: loop.start].rstrip(" ,;:-")


def cut_repeats(text: str, times: int = 2) -> str:
    """The text up to where it starts repeating itself (cut_at_loop: a text the repair continues, read as cut), or
    all of it."""
    cut = cut_at_loop(text, times, cut=True)
    return text.strip() if cut is None else cut


def end_well(text: str, *, capped: bool) -> str:
    """Nobody ships a looping section: a loop (pipeline/text.py's repetition_loop: two copies back to back in an
    answer that ran to the cap, three in one that stopped) is cut at its second copy, and an answer that ran to
    the cap, was cut, or stopped mid-sentence in prose ends on its last full sentence."""
    cut = cut_at_loop(text, 2 if capped else LOOP_REPEATS, cut=capped)
    kept = text if cut is None else cut
    if capped or kept != text or ends_in_open_prose(kept):
        kept = cut_to_sentence(kept) or kept
    return kept


def without_headings(text: str) -> tuple[str, int]:
    """The body without the headings a small model puts inside a section ('## How to Buy (What's the most
    important thing...)'): set in the book they would read as sections of their own. An ATX heading line
    goes; a setext one keeps its text as a paragraph (a sentence over a '---' meant as a rule is one). Code
    blocks are left alone. Returns the text and how many headings it lost."""
    lines = text.splitlines()
    headings = [t for t in _markdown.parse(text) if t.type == "heading_open" and t.map is not None]
    for token in headings:
        start, end = token.map or (0, 0)
        kept = [] if token.markup.startswith("#") else lines[start : end - 1]
        lines[start:end] = kept + [""] * (end - start - len(kept))
    if not headings:
        return text, 0
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), len(headings)


def ends_in_open_prose(text: str) -> bool:
    """The model stopped on its own mid-sentence ('... building your own commands with python'): a prose
    last line without closing punctuation. A list item, table row or code line is left as it is."""
    lines = text.rstrip().splitlines()
    last = lines[-1] if lines else ""
    return bool(last.strip()) and not (is_block(last) or last.startswith(("    ", "\t", "#"))) and not ends_closed(text)
