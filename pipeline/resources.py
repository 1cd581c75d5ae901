"""Where the shipped files are: the prompt templates, book.css and the live page.

`templates/` sits at the top of the repository and is shipped inside the wheel as `pipeline/templates`
(package data: pyproject.toml maps the package `pipeline.templates` onto the folder). `templates_dir()` finds
it with importlib.resources: in an installed wheel beside the package's modules, in a source tree (an editable
install, or the checkout on PYTHONPATH) as the repository's own `templates/` next to `pipeline/`. Either way
it is a real folder, so WeasyPrint's fetcher can check that a URL stays inside it.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from pipeline.errors import FanoutError


@cache
def templates_dir() -> Path:
    """The templates folder: the wheel's package data, else the source tree's templates/."""
    package = files("pipeline")
    if not isinstance(package, Path):
        raise FanoutError(f"fanout must be installed as plain files, not zipped: {package}")
    packaged, source = package / "templates", package.parent / "templates"
    if packaged.is_dir():
        return packaged.resolve()
    if source.is_dir() and (package.parent / "pyproject.toml").is_file():
        return source.resolve()
    raise FanoutError(f"fanout's templates are missing: neither {packaged} nor {source} exists; reinstall fanout")


def template_path(name: str) -> Path:
    """A file of the templates folder (`section.md`, `book.css`, `live.html`, ...)."""
    return templates_dir() / name
