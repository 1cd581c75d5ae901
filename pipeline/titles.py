"""Titles made by a model: cleaned for use, and keyed for comparison."""

from __future__ import annotations

import re
from typing import Any

MAX_TITLE_CHARS = 120
NUMBERING = re.compile(r"^(?:(?i:part|chapter|section)\s+(?:\d+|[IVXLC]+)[.):\-]*\s*"  # Part 3: / Chapter IV.
                       r"|\d+\.\d+(?:\.\d+)*[.):\-]?\s+"  # 1.2 Title / 1.2. Title
                       r"|(?:\d+|[IVXLC]+)[.):\-]\s+)")  # 1. / 2) / IV:


def clean_title(raw: Any) -> str:
    """One title from whatever the model gave: no Markdown marks, numbering, quotes or line breaks."""
    if isinstance(raw, dict):
        raw = raw.get("title") or next((v for v in raw.values() if isinstance(v, str)), "")
    if not isinstance(raw, str):
        return ""
    text = re.sub(r"[#*_`>\[\]{}]", "", raw)
    text = " ".join(text.split()).strip(" \"'“”‘’-–—:;,.")
    text = NUMBERING.sub("", text).strip(" \"'“”-–—:")
    if len(text) > MAX_TITLE_CHARS:
        text = text[:MAX_TITLE_CHARS].rsplit(" ", 1)[0]
    return text


def title_key(title: str) -> str:
    """What makes two titles the same: case, whitespace, Markdown marks and edge punctuation do not count."""
    return " ".join(re.sub(r"[#*_`]", "", title).casefold().split()).strip(" .,:;!?")


MAX_PLAUSIBLE_CHARS = 90


def plausible_title(title: str) -> bool:
    """A usable title: not too short or long, and not a phrase looping on itself (small models do that)."""
    words = title_key(title).split()
    if not 2 <= len(title) <= MAX_PLAUSIBLE_CHARS or not words:
        return False
    trigrams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return len(trigrams) == len(set(trigrams))
