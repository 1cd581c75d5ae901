"""Typesetting benchmark: Typst, our part-parallel WeasyPrint PDF and one stock WeasyPrint document, same book,
same run.

    python -m pipeline.bench.studies.typeset [--shape 8x12x16] [--workers N] [--words 290] [--no-stock] [--keep DIR]
                                     [--floor]

Builds a synthetic book (P x C x S sections of about `--words` words, a code block in three sections of
four, a list or a table in some), then typesets it three times, each in its own child process so that memory
is measured per process and no run warms another:

- typst: `typeset_typst` (one compile in one process, templates/book.typ);
- ours: `typeset_pdf` (parts in a pool of `--workers` processes, front matter, pypdf merge);
- stock: the same book as ONE WeasyPrint document, the way a plain script would do it: pygments' stock
  HtmlFormatter (a span per token), the contents' page numbers by `target-counter`, default gc settings.

It prints wall seconds, pages and peak resident memory of every process (ru_maxrss, as each process reports
it at the end of its work), and the ratios typst/ours and ours/stock. The load average is printed before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "starter flour water crumb crust oven proof dough yeast bacteria acid culture jar lid spoon scale "
    "gram temperature kitchen morning evening rise fall bubble smell sour sweet rye wheat whole white "
    "loaf batch feed discard keep warm cool fridge week day hour minute patience rhythm habit note "
    "record measure compare adjust observe texture aroma flavour hydration salt steam bake shape fold "
    "stretch rest bench basket banneton score blade lame bowl towel cloth surface counter routine"
).split()
CODE_SAMPLES = [
    (
        "python",
        'def feed(starter: dict, grams: int = 50) -> dict:\n    """Feed equal weights of flour and '
        'water."""\n    ratio = starter.get(\'ratio\', 1.0)  # keep the ratio\n    for day in range(7):\n'
        "        starter['flour'] += grams * ratio\n        starter['water'] += grams\n"
        "        print(f\"day {day}: {starter['flour']} g flour, {starter['water']} g water\")\n"
        "    return starter\n",
    ),
    (
        "bash",
        "#!/bin/sh\n# log the temperature every hour\nwhile true; do\n  date +%H:%M >> starter.log\n"
        "  sensors | grep -i 'temp1' | awk '{print $2}' >> starter.log  # a long line that goes on and on"
        " well past the right margin of an A5 page so that it must wrap\n  sleep 3600\ndone\n",
    ),
    (
        "json",
        '{\n  "starter": "rye",\n  "hydration": 100,\n  "feeds": [{"day": 1, "flour": 50, "water": 50}, '
        '{"day": 2, "flour": 100, "water": 100}],\n  "notes": "smells of apples"\n}\n',
    ),
]
STOCK_PAGE_NUMBERS = """<style>
@page :right { @bottom-right { content: counter(page); font-family: "DejaVu Sans"; font-size: 8pt; } }
@page :left { @bottom-left { content: counter(page); font-family: "DejaVu Sans"; font-size: 8pt; } }
@page title { @bottom-right { content: none; } @bottom-left { content: none; } }
@page opener { @bottom-right { content: none; } @bottom-left { content: none; } }
@page :blank { @bottom-right { content: none; } @bottom-left { content: none; } }
</style>
"""


# ---------------------------------------------------------------- the synthetic book


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while sum(len(s.split()) for s in out) < words:
        out.append(_sentence(rng))
    return " ".join(out)


def section_body(rng: random.Random, words: int, number: int) -> str:
    blocks = [_paragraph(rng, words * 2 // 5)]
    if number % 4 != 3:
        lang, code = CODE_SAMPLES[number % len(CODE_SAMPLES)]
        blocks.append(f"```{lang}\n{code}```")
    if number % 5 == 0:
        blocks.append("\n".join(f"- {_sentence(rng)}" for _ in range(3)))
    elif number % 7 == 0:
        blocks.append("| Day | Flour (g) | Water (g) |\n|---|---|---|\n| 1 | 50 | 50 |\n| 2 | 100 | 100 |")
    blocks.append(_paragraph(rng, words * 2 // 5))
    blocks.append(f"Keep `{rng.choice(WORDS)}` in mind: " + _paragraph(rng, words // 6))
    return "\n\n".join(blocks)


def synthetic_book(parts: int, chapters: int, sections: int, words: int = 290, seed: int = 3) -> str:
    """A book shaped like `assemble`'s output: # title, ## Part n., ### n. chapter, #### n.m section."""
    rng = random.Random(seed)
    out = ["# The Synthetic Handbook of Sourdough", ""]
    chapter_number = section_number = 0
    for p in range(1, parts + 1):
        out += [f"## Part {p}. {_sentence(rng)[:-1].title()[:48]}", ""]
        for _ in range(chapters):
            chapter_number += 1
            out += [f"### {chapter_number}. {' '.join(rng.choice(WORDS) for _ in range(4)).title()}", ""]
            for s in range(1, sections + 1):
                section_number += 1
                title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))).capitalize()
                out += [f"#### {chapter_number}.{s} {title}", "", section_body(rng, words, section_number), ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the two runs (each in a child process)


def stock_html(markdown: str, title: str) -> str:
    """The book as one document, as a plain script would build it (pygments' stock HtmlFormatter)."""
    from markdown_it import MarkdownIt
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    from pipeline.typeset import markdown as typeset

    def fence(code: str, lang: str, attrs) -> str:
        try:
            lexer = get_lexer_by_name(lang)
        except ClassNotFound:
            return ""
        return f'<pre class="highlight"><code>{highlight(code, lexer, HtmlFormatter(nowrap=True))}</code></pre>'

    parser = MarkdownIt("commonmark", {"html": False, "highlight": fence}).enable("table")
    tokens = parser.parse(typeset.untitled(markdown)[0])
    headings = typeset.assign_heading_ids(tokens)
    body = (
        typeset.title_page_html(title, typeset.heading_counts(headings))
        + typeset.toc_html([(h, None) for h in headings], target_counter=True)
        + parser.renderer.render(tokens, parser.options, {})
    )
    style = typeset.css_link() + STOCK_PAGE_NUMBERS + f"<style>{HtmlFormatter().get_style_defs('.highlight')}</style>\n"
    return typeset.document(title, style, body)


def run_stock(markdown: str, out: Path) -> dict:
    from pipeline.typeset.weasy import require_fonts, weasy_html

    require_fonts()
    started = time.perf_counter()
    document = weasy_html(stock_html(markdown, "The Synthetic Handbook of Sourdough")).render()
    document.write_pdf(out)
    return {
        "wall_s": time.perf_counter() - started,
        "pages": len(document.pages),
        "rss_mb": {"single document": _rss_mb()},
    }


def run_typst(markdown: str, out: Path) -> dict:
    from pipeline.typeset.typst import typeset_typst

    started = time.perf_counter()
    result = typeset_typst(markdown, "The Synthetic Handbook of Sourdough", out)
    return {"wall_s": time.perf_counter() - started, "pages": result.pages, "rss_mb": {"one process": _rss_mb()}}


def run_ours(markdown: str, out: Path, workers: int) -> dict:
    from pipeline.typeset.book import typeset_pdf

    started = time.perf_counter()
    result = typeset_pdf(markdown, "The Synthetic Handbook of Sourdough", out, workers=workers)
    wall = time.perf_counter() - started
    rss = {"parent (split, merge)": _rss_mb()}
    rss.update({f"worker {i + 1}": mb for i, mb in enumerate(result.worker_rss_mb)})
    return {"wall_s": wall, "pages": result.pages, "rss_mb": rss, "render_cpu_s": result.render_seconds}


FLOOR_CSS = (
    '@page { size: A5; margin: 18mm 15mm 20mm 17mm } html { font-family: "DejaVu Serif"; '
    'font-size: 9.5pt; line-height: 1.4 } pre { font-family: "DejaVu Sans Mono"; font-size: 7.6pt; '
    "white-space: pre-wrap } h3 { break-before: page }"
)


def render_cpu(markdown: str, css: str, out: Path) -> tuple[int, float]:
    """(pages, CPU seconds) to render one part's Markdown to a PDF in this process with `css` inlined."""
    from pipeline.typeset.markdown import document, render_markdown
    from pipeline.typeset.weasy import render_gc_threshold, weasy_html

    started = time.process_time()
    with render_gc_threshold():
        body, _ = render_markdown(markdown, "p0-")
        rendered = weasy_html(document("part", f"<style>{css}</style>", body, "part")).render()
        rendered.write_pdf(out)
    return len(rendered.pages), time.process_time() - started


def floor(markdown: str, folder: Path) -> None:
    """WeasyPrint's own cost a page on this CPU: the book's first part with book.css, then with a bare
    stylesheet (no running heads, justification, hyphenation, leaders or colours), and the least wall time
    the whole book could take at that cost with every core busy and nothing else to do."""
    from pipeline.templating import template_path
    from pipeline.typeset.parts import split_book

    split = split_book(markdown, "floor")
    render_cpu("## Warm-up\n\nimports and fonts\n", FLOOR_CSS, folder / "warm.pdf")
    total_pages = None
    for name, css in (
        ("book.css", template_path("book.css").read_text(encoding="utf-8")),
        ("bare stylesheet", FLOOR_CSS),
    ):
        pages, cpu = render_cpu(split.parts[0], css, folder / "floor.pdf")
        total_pages = total_pages or pages * len(split.parts)
        print(
            f"one part, {name:<16} {pages:>4} pages {cpu:6.2f} CPU s = {1000 * cpu / pages:5.1f} ms a page; "
            f"{total_pages:,} pages at that cost on {os.cpu_count()} cores: >= "
            f"{total_pages * cpu / pages / (os.cpu_count() or 1):5.1f} s wall",
            flush=True,
        )


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(kind: str, markdown_path: Path, out: Path, workers: int) -> dict:
    command = [
        sys.executable,
        "-m",
        "pipeline.bench.studies.typeset",
        "--child",
        kind,
        "--markdown",
        str(markdown_path),
        "--pdf",
        str(out),
        "--workers",
        str(workers),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def _line(name: str, result: dict) -> str:
    rss = ", ".join(f"{k} {v:,.0f}" for k, v in result["rss_mb"].items())
    return f"{name:<22} {result['wall_s']:>8.1f} {result['pages']:>7,}   {rss}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.bench.studies.typeset", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--shape", default="8x12x16", help="parts x chapters x sections (8x12x16)")
    parser.add_argument("--words", type=int, default=290, help="words a section (290)")
    parser.add_argument("--workers", type=int, default=2, help="our pool size (2)")
    parser.add_argument("--no-stock", action="store_true", help="skip the stock single-document run")
    parser.add_argument("--keep", type=Path, help="leave book.md and the PDFs in this folder")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time one part with book.css and with a "
        "bare stylesheet in one process: WeasyPrint's cost a page, and the least wall time "
        "it allows for the whole book on this machine",
    )
    parser.add_argument("--no-weasyprint", action="store_true", help="typst alone (neither WeasyPrint run)")
    parser.add_argument("--child", choices=["typst", "ours", "stock"], help=argparse.SUPPRESS)
    parser.add_argument("--markdown", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pdf", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        markdown = args.markdown.read_text(encoding="utf-8")
        runs = {
            "typst": lambda: run_typst(markdown, args.pdf),
            "ours": lambda: run_ours(markdown, args.pdf, args.workers),
            "stock": lambda: run_stock(markdown, args.pdf),
        }
        print(json.dumps(runs[args.child]()))
        return 0
    from pipeline.config import parse_shape

    parts, chapters, sections = parse_shape(args.shape)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fanout-typeset-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    markdown = synthetic_book(parts, chapters, sections, args.words)
    (folder / "book.md").write_text(markdown, encoding="utf-8")
    print(
        f"synthetic book {args.shape}: {parts * chapters * sections:,} sections, {len(markdown.split()):,} "
        f"words, {markdown.count('```') // 2:,} code blocks; {os.cpu_count()} cores"
    )
    print(f"{'':<22} {'wall s':>8} {'pages':>7}   peak RSS per process (MB)")
    print(f"load average before typst: {_load()}")
    typst = _child("typst", folder / "book.md", folder / "typst.pdf", args.workers)
    print(_line("typst (one compile)", typst), flush=True)
    if args.no_weasyprint:
        return _done(folder, keep=args.keep)
    print(f"load average before ours: {_load()}")
    ours = _child("ours", folder / "book.md", folder / "ours.pdf", args.workers)
    print(_line(f"ours ({args.workers} workers)", ours), flush=True)
    print(f"ratio typst/ours: wall {typst['wall_s'] / ours['wall_s']:.2f} (goal <= 0.2); typst's process "
          f"{max(typst['rss_mb'].values()):,.0f} MB (goal <= 2,048 MB)")  # fmt: skip
    if not args.no_stock:
        print(f"load average before stock: {_load()}")
        stock = _child("stock", folder / "book.md", folder / "stock.pdf", args.workers)
        print(_line("stock (one document)", stock))
        print(
            f"ratio ours/stock: wall {ours['wall_s'] / stock['wall_s']:.2f} (goal <= 0.25); largest process "
            f"{max(ours['rss_mb'].values()) / max(stock['rss_mb'].values()):.2f} "
            f"({max(ours['rss_mb'].values()):,.0f} MB vs {max(stock['rss_mb'].values()):,.0f} MB; "
            f"goal <= 500 MB a process)"
        )
    if args.floor:
        print(f"load average before the floor: {_load()}")
        floor(markdown, folder)
    return _done(folder, keep=args.keep)


def _done(folder: Path, *, keep: Path | None) -> int:
    print(f"load average after: {_load()}")
    if keep:
        print(f"files in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
