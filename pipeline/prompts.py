"""Prompt templates are plain files in templates/ with $placeholders (string.Template), not strings in code;
`pipeline.resources` finds the folder (the source tree's, or the wheel's package data).

A template may be a whole chat: lines `<<user>>` and `<<assistant>>` start each turn, so a worked example
(a question and the answer we want) goes before the real question. Small models follow a shown answer far
better than a described one (SmolLM2-135M planning: 37 of 40 usable headings with one worked example, 14 of
40 without; see the README's planning notes).
"""

from __future__ import annotations

import re
from functools import cache
from string import Template

from pipeline.resources import template_path

TURN = re.compile(r"^<<(user|assistant|system)>>\s*$", re.M)


@cache
def template(name: str) -> Template:
    return Template(template_path(name).read_text(encoding="utf-8"))


def render(name: str, **values: object) -> str:
    """Fill a template; values (model-made titles included) are inserted verbatim, never re-expanded."""
    return template(name).substitute({key: str(value) for key, value in values.items()}).strip()


def render_chat(name: str, **values: object) -> list[dict[str, str]]:
    """A template as chat messages: its `<<role>>` turns, or one user turn if it has none."""
    text = render(name, **values)
    pieces = TURN.split(text)
    if len(pieces) == 1:
        return [{"role": "user", "content": text}]
    return [{"role": role, "content": content.strip()} for role, content in zip(pieces[1::2], pieces[2::2])]


def example_answer(name: str) -> str:
    """The worked example's answer in a chat template (its first assistant turn), or ''."""
    pieces = TURN.split(template(name).template)
    return next((content for role, content in zip(pieces[1::2], pieces[2::2]) if role == "assistant"), "")
