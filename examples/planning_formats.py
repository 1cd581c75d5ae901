"""Which planning format a small model follows: the measurement behind templates/plan_*.md.

Asks the same chapters for their sections in three formats, on the embedded engine (or `--backend URL`),
with the `small` sampling profile and two seeds each, and counts the headings fanout's own checks would take
(pipeline/book/plan/policy.py's title rules: no echo of the chapter or book title, no identifier, no
near-repeat of a sibling) and how many came with a key point:

- json: "Answer with JSON only" and a JSON schema with the exact count (the planner's first format);
- list: a numbered `Heading: sentence` list, described but not shown;
- example: the same list after one worked example (a question and its answer as an earlier chat turn).

    .venv/bin/python examples/planning_formats.py [--backend http://127.0.0.1:8080/v1] [--seeds 1,2]

Measured 2026-12-01 on SmolLM2-135M-Instruct Q4_1, 1 thread (Intel Xeon, 2 cores), five chapters x two
seeds, 4 headings asked each (40), counted by today's refusal checks:

| format | usable headings | with a point |
|---|---|---|
| json (titles only, by its schema) | 28/40 | 5 |
| list | 12/40 | 8 |
| example | 33/40 | 33 |

JSON gives titles but no points; the worked example gives the most usable headings, every one with its
point, which the writers need.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.backends.embedded.engine import EmbeddedEngine  # noqa: E402
from pipeline.book.plan import policy  # noqa: E402
from pipeline.book.plan.prompts import (
    PlanItem,  # noqa: E402
    parse_items,  # noqa: E402
)
from pipeline.book.profiles import PROFILES, sampling_body  # noqa: E402
from pipeline.config import EngineSettings  # noqa: E402
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.records import EngineKind  # noqa: E402
from pipeline.templating import render_chat  # noqa: E402

CHAPTERS = [
    ("Keeping a Sourdough Starter Alive", "Feeding Your Starter"),
    ("Writing Command-Line Tools in Python", "Parsing Arguments"),
    ("The Printing Press in Europe", "Gutenberg's Workshop in Mainz"),
    ("How Vaccines Train the Immune System", "Antibodies and Memory Cells"),
    ("Woodworking with Hand Tools", "Sharpening Chisels and Planes"),
]
COUNT = 4
JSON_ASK = (
    'What are {n} topics to cover in the chapter "{chapter}" of the book "{book}"? Give one short section '
    'title per topic, each different from the others.\n\nAnswer with JSON only: {{"titles": ["...", "..."]}}'
)
LIST_ASK = (
    'List {n} sections for the chapter "{chapter}" of the book "{book}".\nOne per line, numbered: a short '
    "heading, a colon, then one sentence on what the section teaches."
)


def messages(form: str, book: str, chapter: str) -> list[dict[str, str]]:
    if form == "json":
        return [{"role": "user", "content": JSON_ASK.format(n=COUNT, chapter=chapter, book=book)}]
    if form == "list":
        return [{"role": "user", "content": LIST_ASK.format(n=COUNT, chapter=chapter, book=book)}]
    return render_chat(
        "plan_chapter.md",
        how_many=f"{COUNT} sections",
        chapter_title=chapter,
        book_title=book,
        chapter_about="",
        avoid="",
    )


def body(form: str, book: str, chapter: str, seed: int) -> dict:
    profile = PROFILES["small"].model_copy(update={"seed": seed})
    fields = {
        "messages": messages(form, book, chapter),
        "max_tokens": 300,
        "temperature": profile.temperature,
        **sampling_body(profile, {EngineKind.LLAMACPP}, chapter),
    }
    if form == "json":
        schema = {
            "type": "object",
            "properties": {
                "titles": {"type": "array", "minItems": COUNT, "maxItems": COUNT, "items": {"type": "string"}}
            },
            "required": ["titles"],
        }
        fields["response_format"] = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
    return fields


def ask(url: str, payload: dict) -> str:
    request = urllib.request.Request(
        url + "/chat/completions", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["message"]["content"]


# a title's form and place, by its words
TITLE_PLACE = [rule for rule in policy.CHAINS[policy.Chain.AGAIN] if rule.group is policy.Group.DEFECT]
CONTEXT = policy.Context(open_embedder())


def line_of(title: str, ancestors: dict[str, str], chosen: list[str]) -> policy.Line:
    return policy.Line.of(PlanItem(title), ancestors=ancestors, taken=chosen)


def usable(text: str, book: str, chapter: str) -> tuple[int, int]:
    """Headings fanout would take (at most COUNT), and how many of them came with a point."""
    chosen: list[str] = []
    points = 0
    ancestors = {"the chapter title": chapter, "the book title": book}
    for item in parse_items(text):
        if (
            len(chosen) < COUNT
            and next(policy.found_by(TITLE_PLACE, line_of(item.title, ancestors, chosen), CONTEXT, strict=True), None)
            is None
        ):
            chosen.append(item.title)
            points += bool(item.point)
    return len(chosen), points


def measure(url: str, seeds: list[int]) -> None:
    print("| format | usable headings | with a point |\n|---|---|---|")
    for form in ("json", "list", "example"):
        taken = pointed = 0
        for book, chapter in CHAPTERS:
            for seed in seeds:
                got, with_point = usable(ask(url, body(form, book, chapter, seed)), book, chapter)
                taken, pointed = taken + got, pointed + with_point
        asked = COUNT * len(CHAPTERS) * len(seeds)
        print(f"| {form} | {taken}/{asked} | {pointed} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", help="an OpenAI-compatible base URL (default: start the embedded engine)")
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.backend:
        measure(args.backend.rstrip("/"), seeds)
        return
    with EmbeddedEngine(EngineSettings(slots=4, threads=1, ctx_per_slot=2048)) as engine:
        measure(engine.backend.base_url, seeds)


if __name__ == "__main__":
    main()
