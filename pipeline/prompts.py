"""Prompt templates are plain files in templates/ with $placeholders (string.Template), not strings in code."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@cache
def template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def render(name: str, **values: object) -> str:
    """Fill a template; values (model-made titles included) are inserted verbatim, never re-expanded."""
    return template(name).substitute({key: str(value) for key, value in values.items()}).strip()
