"""WeasyPrint, safely: an HTML object that can fetch nothing but templates/ files, and the checks around it.

Takes an HTML page; returns a WeasyPrint HTML object whose URL fetcher serves only files inside the
templates folder (`pipeline.templating`: the project's `templates/`, or the wheel's copy of it) and raises
for every other URL, so untrusted text cannot make it fetch anything. With no fonts installed WeasyPrint
segfaults; `require_fonts` turns that into a clear error first. `render_gc_threshold` tunes the gc while
WeasyPrint builds its boxes.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pipeline.errors import FanoutError
from pipeline.templating import templates_dir

RENDER_GC_THRESHOLD = (100000, 50, 100)


CONTENT_TYPES = {
    ".css": "text/css",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def _templates_path(url: str) -> Path:
    """The file inside templates/ that `url` names; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise ValueError(f"fetching refused (only templates/ files): {url}")
    path = Path(unquote(parts.path)).resolve()
    if not path.is_relative_to(templates_dir()) or not path.is_file():
        raise ValueError(f"fetching refused (only templates/ files): {url}")
    return path


def templates_only_fetcher():
    """A WeasyPrint URL fetcher that serves files from templates/ and raises for every other URL."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class TemplatesOnlyFetcher(URLFetcher):
        def fetch(self, url, headers=None):
            path = _templates_path(url)
            content_type = CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
            return URLFetcherResponse(url, path.read_bytes(), {"Content-Type": content_type})

    return TemplatesOnlyFetcher(allowed_protocols=("file",))


def weasy_html(page: str):
    """A WeasyPrint HTML object for `page` that can fetch nothing but templates/ files."""
    from weasyprint import HTML

    return HTML(string=page, base_url=templates_dir().as_uri() + "/", url_fetcher=templates_only_fetcher())


def installed_font_count() -> int:
    """How many fonts fontconfig finds (read fresh, so FONTCONFIG_FILE changes are seen)."""
    from weasyprint.text.ffi import ffi, fontconfig

    config = fontconfig.FcInitLoadConfigAndFonts()
    if config == ffi.NULL:
        return 0
    try:
        fonts = fontconfig.FcConfigGetFonts(config, fontconfig.FcSetSystem)
        return 0 if fonts == ffi.NULL else fonts.nfont
    finally:
        fontconfig.FcConfigDestroy(config)


def require_fonts() -> None:
    """WeasyPrint segfaults when fontconfig has no fonts; fail cleanly instead."""
    if installed_font_count() == 0:
        raise FanoutError("no fonts installed: fontconfig finds none (WeasyPrint would crash); run make setup")


@contextmanager
def render_gc_threshold():
    """Fewer gen-0 collections while WeasyPrint builds its millions of boxes (measured ~1.8x faster)."""
    saved = gc.get_threshold()
    gc.set_threshold(*RENDER_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
