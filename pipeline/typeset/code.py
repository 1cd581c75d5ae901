"""Code highlighting for the book: fenced code in, lean HTML out.

`highlight(code, lang)` returns a complete `<pre>` element. Pygments lexes the code when the fence names a
language it knows (no guessing: guessing is slow and often wrong); tokens are mapped onto six classes
(`k` keyword, `s` string, `c` comment, `m` number, `nf` function/class name, `nb` builtin), neighbouring
tokens of one class share a span, and default-styled tokens (names, punctuation, operators, spaces) get no
span at all. Pygments' stock HtmlFormatter writes a span per token; on a 1,536-section book that is ~75k
boxes WeasyPrint must lay out, the largest single cost of typesetting. Everything is HTML-escaped.
"""

from __future__ import annotations

import html
from functools import cache, lru_cache

from pygments import lex
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, String, _TokenType
from pygments.util import ClassNotFound

MAX_HIGHLIGHT_CHARS = 20_000  # longer blocks (model output is untrusted) are shown plain
TOKEN_CLASSES = {
    Keyword: "k",
    Operator.Word: "k",
    Name.Builtin: "nb",
    Name.Function: "nf",
    Name.Class: "nf",
    Name.Decorator: "nf",
    Name.Tag: "k",
    String: "s",
    Number: "m",
    Comment: "c",
}


@cache
def token_class(ttype: _TokenType | None) -> str | None:
    """The class for a token type (its own or its nearest ancestor's), None for default-styled tokens."""
    while ttype is not None:
        if ttype in TOKEN_CLASSES:
            return TOKEN_CLASSES[ttype]
        ttype = ttype.parent
    return None


@lru_cache(maxsize=64)
def _lexer(lang: str) -> Lexer | None:
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def lean_html(code: str, lexer: Lexer) -> str:
    """The code's HTML: one span per run of same-class tokens, none for default tokens."""
    out: list[str] = []
    run_class: str | None = None
    run_text: list[str] = []
    for ttype, value in lex(code, lexer):
        cls = token_class(ttype)
        if cls != run_class and run_text:
            out.append(_span(run_class, "".join(run_text)))
            run_text = []
        run_class = cls
        run_text.append(value)
    if run_text:
        out.append(_span(run_class, "".join(run_text)))
    return "".join(out)


def _span(cls: str | None, text: str) -> str:
    escaped = html.escape(text, quote=False)
    return f'<span class="{cls}">{escaped}</span>' if cls and text.strip() else escaped


def highlight(code: str, lang: str) -> str:
    """A `<pre class="code">` element for one fenced block; plain (escaped) when the language is unknown."""
    lang = (lang or "").strip().split()[0].lower() if (lang or "").strip() else ""
    lexer = _lexer(lang) if lang and len(code) <= MAX_HIGHLIGHT_CHARS else None
    body = lean_html(code, lexer) if lexer is not None else html.escape(code, quote=False)
    label = f' data-lang="{html.escape(lang)}"' if lang else ""
    return f'<pre class="code"{label}><code>{body}</code></pre>\n'
