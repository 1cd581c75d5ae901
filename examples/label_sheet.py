"""A book's sheet for labelling by reading: its request, its contents page, and each section's heading and opening.

    python examples/label_sheet.py RUN_DIR [RUN_DIR ...] > sheet.md

Each book's sheet gives what a reader judges: the request, the contents (every part, chapter and section title
with its id, as the contents page lists them), and for each section its title, key point and the opening words of
its text (pipeline/meaning/onsubject.py's TEXT_WORDS, what the on-subject judge reads). A labeller writes, per book,
{"headings": {"<id>": 0 or 1 for every part, chapter and section title}, "sections": {"<section id>": 0 or 1}}
by the rule in tests/fixtures/meaning/on_subject_forms.json; examples/subject_counts.py sets the labels beside the
judge's figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.journal import read_journal  # noqa: E402
from pipeline.meaning.onsubject import opening  # noqa: E402


def sheet(run: Path) -> str:
    spec = json.loads((run / "spec.json").read_text())
    outline = json.loads((run / "outline.json").read_text())
    texts = {id_: result.text or "" for id_, result in read_journal(run / "sections.jsonl").items()}
    lines = [f"# Book {run.name}", "", f"Request: {spec['prompt']}", "", f"Book title: {outline['title']}", ""]
    lines += ["## Contents", ""]
    for part in outline["parts"]:
        lines.append(f"- {part['id']} (part) {part['title']}")
        for chapter in part["chapters"]:
            lines.append(f"  - {chapter['id']} (chapter) {chapter['title']}")
            for section in chapter["sections"]:
                lines.append(f"    - {section['id']} (section) {section['title']}")
    lines += ["", "## Sections", ""]
    for part in outline["parts"]:
        for chapter in part["chapters"]:
            for section in chapter["sections"]:
                lines += [
                    f"### {section['id']} {section['title']}",
                    f"Chapter: {chapter['title']}",
                    f"Point: {section.get('point', '')}",
                    f"Opening: {opening(texts.get(section['id'], ''))}",
                    "",
                ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    for folder in argv:
        print(sheet(Path(folder)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
