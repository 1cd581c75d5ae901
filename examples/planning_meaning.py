"""Which chapter-planning prompt gives a small model's sections that pass fanout's checks by words and by
meaning: the measurement behind templates/plan_chapter.md.

Asks the sections of a few chapters (as a planner gives them: book title, chapter title and point) in several
forms, with the `small` profile and several seeds, on the embedded engine (or `--backend URL`), and runs each
answer's items through the planner's own checks (pipeline/book/plan/checks.py: titles, worked-example copies, vague
points, titles that say what a sibling says), in answer order, as the planner would:

- example: one worked example (a sailing chapter) as an earlier chat turn (templates/plan_chapter.md);
- two: a second worked example on an unlike subject before it, so that no one subject is the model's to copy;
- none: the same numbered `Heading: sentence` list described, with no example;
- reask, reask-chosen, reask-fresh: a re-ask after two items were taken and two refused, as the planner
  sends it (the taken titles and the refused ones with their reasons), with the taken titles only, or
  with neither (a fresh ask; the planner's own checks drop repeats).

For each form: items taken of those asked, items refused for copying an example, and the on-point spread of
the taken items (the mean cosine between sibling units: lower is better, the writer needs distinct points).

    .venv/bin/python examples/planning_meaning.py [--backend URL] [--seeds 1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.backends.embedded.engine import EmbeddedEngine  # noqa: E402
from pipeline.book.plan.checks import TitleChecks  # noqa: E402
from pipeline.book.plan.policy import Chain  # noqa: E402
from pipeline.book.plan.prompts import (  # noqa: E402
    about,
    example_words,
    parse_items,  # noqa: E402
)
from pipeline.book.profiles import PROFILES, sampling_body  # noqa: E402
from pipeline.config import EngineSettings  # noqa: E402
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.meaning.nearness import unit  # noqa: E402
from pipeline.records import BookSpec, EngineKind  # noqa: E402
from pipeline.templating import render_chat  # noqa: E402
from pipeline.titles import content_words  # noqa: E402

CHAPTERS = [
    (
        "Write a short handbook on keeping a sourdough starter alive.",
        "The Living Starter",
        "Feeding Your Starter",
        "What a starter eats and how often.",
    ),
    (
        "Write a handbook on building command-line tools in Python.",
        "Tools for the Terminal",
        "Parsing Arguments",
        "How a program reads what the user typed.",
    ),
    (
        "Write a short history of the printing press in Europe.",
        "The Printed Page",
        "Gutenberg's Workshop",
        "How movable type was made in Mainz.",
    ),
    (
        "Explain how vaccines train the immune system.",
        "How Vaccines Work",
        "Immune Memory",
        "How the body remembers a germ it has met.",
    ),
    (
        "Write a beginner's guide to woodworking with hand tools.",
        "Working Wood by Hand",
        "Sharpening",
        "How to keep chisels and planes sharp.",
    ),
]
COUNT = 4
REASK = {  # chapter -> (two titles taken, two refused with their reasons), as a planner's first answer leaves it
    "Feeding Your Starter": (
        ["Choosing a Flour", "Feeding Ratios"],
        [("Feeding Your Starter", "repeats the chapter title"), ("Flour Choices", 'nearly repeats "Choosing a Flour"')],
    ),
    "Parsing Arguments": (
        ["Positional Arguments", "Optional Flags"],
        [
            ("Parsing Arguments", "repeats the chapter title"),
            ("Flags and Options", 'says the same as "Optional Flags"'),
        ],
    ),
    "Gutenberg's Workshop": (
        ["Casting Type", "The Screw Press"],
        [("Gutenberg's Workshop", "repeats the chapter title"), ("The Press", 'says the same as "The Screw Press"')],
    ),
    "Immune Memory": (
        ["Memory B Cells", "Antibodies"],
        [("Immune Memory", "repeats the chapter title"), ("B Cells", 'says the same as "Memory B Cells"')],
    ),
    "Sharpening": (
        ["Flattening the Back", "Honing the Bevel"],
        [("Sharpening", "repeats the chapter title"), ("Honing", 'says the same as "Honing the Bevel"')],
    ),
}
SECOND_EXAMPLE = [
    {
        "role": "user",
        "content": 'List 4 sections for the chapter "Sowing Seeds" of the book "The Kitchen Garden". The chapter '
        "covers when and how to sow vegetables.\nOne per line, numbered: a short heading, a colon, then one "
        "sentence on what the section teaches.",
    },
    {
        "role": "assistant",
        "content": "1. Seed Trays: How to fill trays with compost and sow at the right depth.\n2. Sowing Outdoors: "
        "When the soil is warm enough for beans and carrots.\n3. Thinning Out: Why crowded seedlings grow "
        "weak and how many to pull.\n4. Hardening Off: How to move young plants outside a little at a time.",
    },
]
DESCRIBED = (
    'List {n} sections for the chapter "{chapter}" of the book "{book}". The chapter covers: {point}\n'
    "One per line, numbered: a short heading, a colon, then one sentence on what the section teaches."
)


def messages(form: str, book: str, chapter: str, point: str) -> list[dict[str, str]]:
    if form.startswith("reask"):
        chosen, refused = REASK[chapter]
        avoid = avoid_note(chosen, [] if form == "reask-chosen" else refused) if form != "reask-fresh" else ""
        return render_chat(
            "plan_chapter.md",
            how_many=f"{COUNT} sections",
            chapter_title=chapter,
            book_title=book,
            chapter_about=about("chapter", point),
            must="",
            avoid=avoid,
        )
    if form == "none":
        return [{"role": "user", "content": DESCRIBED.format(n=COUNT + 2, chapter=chapter, book=book, point=point)}]
    chat = render_chat(
        "plan_chapter.md",
        how_many=f"{COUNT + 2} sections",
        chapter_title=chapter,
        book_title=book,
        chapter_about=about("chapter", point),
        must="",
        avoid="",
    )
    return SECOND_EXAMPLE + chat if form == "two" else chat


def ask(url: str, chat: list[dict[str, str]], seed: int) -> str:
    profile = PROFILES["small"].model_copy(update={"seed": seed})
    payload = {
        "messages": chat,
        "max_tokens": 48 * (COUNT + 3),
        "temperature": profile.planning_temperature,
        **sampling_body(profile, {EngineKind.LLAMACPP}, f"plan{seed}"),
    }
    request = urllib.request.Request(
        url + "/chat/completions", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=1200) as response:
        return str(json.load(response)["choices"][0]["message"]["content"])


SHOWN_REFUSALS = 30


def avoid_note(chosen: list[str], refused: list[tuple[str, str]]) -> str:
    """The re-ask note this measurement compared (fanout's planner showed it until da11346; it now shows only the
    titles chosen, prompts.chosen_note): the headings already chosen, and the refused ones with the reason."""
    lines = []
    if chosen:
        lines.append("Already chosen, do not repeat: " + "; ".join(f'"{t}"' for t in chosen[-SHOWN_REFUSALS:]) + ".")
    if refused:
        shown = "; ".join(f'"{t}" ({why})' for t, why in refused[-SHOWN_REFUSALS:])
        lines.append(f"Refused, do not use again: {shown}.")
    return ("\n" + "\n".join(lines)) if lines else ""


def judge(answer: str, request: str, book: str, chapter: str, *, reasked: bool) -> tuple[list[str], int]:
    """The units the planner would take from this answer (at most COUNT), and how many it refused as copies."""
    spec = BookSpec(prompt=request, parts=1, chapters=1, sections=COUNT)
    checks = TitleChecks(open_embedder(), spec.prompt)
    ancestors = {"the chapter title": chapter, "the book title": book, "the request": request}
    copied = example_words("plan_chapter.md") - content_words(request)
    taken: list[str] = list(REASK[chapter][0]) if reasked else []
    units: list[str] = []
    copies = 0
    for item in parse_items(answer):
        if len(taken) == COUNT:
            break
        if item.title in taken:
            continue
        found = checks.first(Chain.DEFECT, item, ancestors=ancestors, taken=taken, forbidden=copied) or checks.first(
            Chain.HOLD, item, taken=taken, sibling_units=units, fit=1.0, owed=[]
        )
        copies += found is not None and "worked example" in str(found)
        reason = None if found is None else str(found)
        if reason is None:
            taken.append(item.title)
            units.append(unit(item.title, item.point))
    return units, copies


def measure(url: str, forms: list[str], seeds: list[int]) -> None:
    embedder = open_embedder()
    jobs = [(form, c, seed) for form in forms for c in range(len(CHAPTERS)) for seed in seeds]
    with ThreadPoolExecutor(16) as pool:
        answers = dict(zip(jobs, pool.map(lambda j: ask(url, messages(j[0], *CHAPTERS[j[1]][1:]), j[2]), jobs)))
    print("| form | items taken | refused as copies | mean cosine between taken siblings |\n|---|---|---|---|")
    for form in forms:
        taken = copies = 0
        spreads = []
        for (f, c, _), answer in answers.items():
            if f != form:
                continue
            request, book, chapter, _ = CHAPTERS[c]
            units, copied = judge(answer, request, book, chapter, reasked=form.startswith("reask"))
            taken, copies = taken + len(units), copies + copied
            if len(units) > 1:
                vectors = embedder.embed(units)
                scores = vectors @ vectors.T
                spreads.append(float(scores[np.triu_indices(len(units), 1)].mean()))
        spread = statistics.mean(spreads) if spreads else float("nan")
        asked = (COUNT - 2 * form.startswith("reask")) * len(CHAPTERS) * len(seeds)
        print(f"| {form} | {taken}/{asked} | {copies} | {spread:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", help="an OpenAI-compatible base URL (default: start the embedded engine)")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--forms", default="example,two,none")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.backend:
        measure(args.backend.rstrip("/"), args.forms.split(","), seeds)
        return
    with EmbeddedEngine(EngineSettings(slots=16, threads=args.threads, ctx_per_slot=2048)) as engine:
        measure(engine.backend.base_url, args.forms.split(","), seeds)


if __name__ == "__main__":
    main()
