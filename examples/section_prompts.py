"""Which section prompt keeps a small model on its section's point: the measurement behind templates/section.md.

Writes the sections of a few well-planned chapters (titles and key points as a good planner gives them) in
several prompt forms, each with several seeds, on the embedded engine (or `--backend URL`) with the `small`
sampling profile, and scores every answer by meaning (pipeline/audit/analysis.py): on point (nearer its own
title and point than any sibling's), the margin, the same with sentences that restate the point removed, and
best-of-k (the candidate with the widest margin of k seeds).

    .venv/bin/python examples/section_prompts.py [--backend URL] [--seeds 1,2,3] [--forms siblings,none,...]

The forms:
- siblings: the sibling sections' titles and points as "covered in other sections, so not here";
- none: no word of the siblings;
- titles: the siblings' titles only, as the chapter's other sections;
- focus: the section's point first and alone, asked as the one thing the section explains, with the
  siblings' titles after it as what the reader finds elsewhere;
- bare: the book and chapter, the section's title and point, then the instructions (templates/section.md
  before the prefix cache);
- cache-first: the same words with the instructions first and the section last, so every section of a
  chapter shares its prompt up to its own title (templates/section.md now).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.audit.analysis import margins  # noqa: E402
from pipeline.backends.embedded.engine import EmbeddedEngine  # noqa: E402
from pipeline.book.profiles import PROFILES, sampling_body  # noqa: E402
from pipeline.book.trim import tidy_opening  # noqa: E402
from pipeline.config import EngineSettings  # noqa: E402
from pipeline.meaning.embed import open_embedder  # noqa: E402
from pipeline.meaning.nearness import unit, unrestated  # noqa: E402
from pipeline.records import EngineKind  # noqa: E402

CHAPTERS = [
    (
        "Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
        "The Living Starter",
        "Feeding Your Starter",
        [
            ("Choosing a Flour", "Which flours feed a starter best, and why whole grain speeds it up."),
            ("Feeding Ratios", "How to weigh starter, flour and water, from 1:1:1 to stiffer mixes."),
            ("Feeding Schedules", "How often to feed at room temperature and when kept in the fridge."),
            ("Signs of Hunger", "How smell, bubbles and a fallen dome tell you the starter needs food."),
        ],
    ),
    (
        "Write a handbook on building command-line tools in Python, with code examples.",
        "Command-Line Tools in Python",
        "Parsing Arguments",
        [
            ("Positional Arguments", "How argparse reads required values in the order they are typed."),
            ("Optional Flags", "How to add switches and options with defaults, like --verbose and --out."),
            ("Subcommands", "How to split a tool into commands such as git's add and commit."),
            ("Help Text and Errors", "How to write usage messages and exit with a clear error code."),
        ],
    ),
    (
        "Explain how vaccines train the immune system, for curious readers without a biology degree.",
        "How Vaccines Teach the Body",
        "Immune Memory",
        [
            ("Antibodies", "How Y-shaped proteins latch onto a germ and mark it for destruction."),
            ("Memory B Cells", "How a few cells remember a germ for years and wake when it returns."),
            ("Killer T Cells", "How T cells find and destroy body cells that a virus has taken over."),
            ("Booster Shots", "Why a second dose makes the memory stronger and longer lasting."),
        ],
    ),
]
FOOT = (
    "Write {paragraphs} paragraphs, about {words} words in all, in Markdown. Be concrete and practical, with one "
    "example. Do not start with a heading. End with a complete sentence."
)
WORDS = 250


def prompt(form: str, request: str, book: str, chapter: str, sections: list, index: int) -> str:
    title, point = sections[index]
    others = [s for i, s in enumerate(sections) if i != index]
    head = f'You are writing one section of the book "{book}", written for this request: {request}\n'
    head += f"Chapter: {chapter}\n"
    foot = FOOT.format(paragraphs=3, words=WORDS)
    ask = f'Write the section "{title}". It explains: {point}\n{foot}'
    bare = f'You are writing one section of the book "{book}", chapter "{chapter}".\n\n'
    if form == "siblings":
        listed = "; ".join(f'"{t}" ({p.rstrip(".")})' for t, p in others)
        return f"{head}Covered in other sections of this chapter, so not here: {listed}.\n\n{ask}"
    if form in ("none", "cool"):
        return f"{head}\n{ask}"
    if form == "titles":
        listed = "; ".join(f'"{t}"' for t, _ in others)
        return f"{head}The chapter's other sections: {listed}.\n\n{ask}"
    if form == "bare-request":
        return f"{bare}{ask}\nThe book is written for this request: {request}"
    if form in ("bare", "bare-cool"):
        return f"{bare}{ask}"
    if form == "cache-first":  # bare, reordered so that what every section shares comes first
        return (
            f"You are writing one section of a book. {foot}\n\n"
            f'The book is "{book}". The chapter is "{chapter}".\n\n'
            f'Write the section "{title}". It explains: {point}'
        )
    if form == "question":
        wants = f'A reader of the section "{title}" wants to know: {point.rstrip(".")}?'
        return f"{head}\n{wants}\nWrite the section that answers them. {foot}"
    listed = "; ".join(f'"{t}"' for t, _ in others)
    return (
        f'{head}\nWrite the section "{title}". Its one subject: {point}\nEvery paragraph is about that subject; '
        f"the reader finds {listed} in other sections.\n{foot}"
    )


TEMPERATURES = {"cool": 0.3, "bare-cool": 0.3}


def ask(url: str, text: str, seed: int, form: str) -> str:
    profile = PROFILES["small"].model_copy(update={"seed": seed})
    profile = profile.model_copy(update={"temperature": TEMPERATURES.get(form, profile.temperature)})
    payload = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 455,
        "temperature": profile.temperature,
        **sampling_body(profile, {EngineKind.LLAMACPP}, f"seed{seed}"),
    }
    request = urllib.request.Request(
        url + "/chat/completions", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=1200) as response:
        return tidy_opening(json.load(response)["choices"][0]["message"]["content"])


def measure(url: str, forms: list[str], seeds: list[int], streams: int) -> None:
    embedder = open_embedder()
    jobs = [(f, c, i, s) for f in forms for c in range(len(CHAPTERS)) for i in range(4) for s in seeds]
    with ThreadPoolExecutor(streams) as pool:
        texts = dict(
            zip(
                jobs,
                pool.map(lambda j: ask(url, prompt(j[0], *CHAPTERS[j[1]], j[2]), j[3], j[0]), jobs),
            )
        )
    print("| form | on point | margin median | on point, restating removed | best of k on point |")
    print("|---|---|---|---|---|")
    for form in forms:
        on, marg, plain, best = [], [], [], []
        for c, (_, _, _, sections) in enumerate(CHAPTERS):
            units = embedder.embed([unit(t, p) for t, p in sections])
            per_seed = []
            for seed in seeds:
                bodies = [texts[(form, c, i, seed)] for i in range(4)]
                kept = margins(embedder.embed(bodies), units)[0]
                stripped = margins(embedder.embed([unrestated(b, p) for b, (_, p) in zip(bodies, sections)]), units)[0]
                on += [m > 0 for m in kept]
                marg += kept
                plain += [m > 0 for m in stripped]
                per_seed.append(kept)
            best += [max(per_seed[k][i] for k in range(len(seeds))) > 0 for i in range(4)]
        print(
            f"| {form} | {sum(on)}/{len(on)} | {statistics.median(marg):+.3f} | {sum(plain)}/{len(plain)} | "
            f"{sum(best)}/{len(best)} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", help="an OpenAI-compatible base URL (default: start the embedded engine)")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--forms", default="siblings,none,titles,focus")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    forms = args.forms.split(",")
    if args.backend:
        measure(args.backend.rstrip("/"), forms, seeds, 16)
        return
    with EmbeddedEngine(EngineSettings(slots=16, threads=args.threads, ctx_per_slot=2048)) as engine:
        measure(engine.backend.base_url, forms, seeds, 16)


if __name__ == "__main__":
    main()
