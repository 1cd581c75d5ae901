"""A labelled set of books from run folders and readers' labels: the fixture the on-subject judge is calibrated and
checked on (tests/fixtures/meaning/on_subject_forms*.json).

    python examples/label_fixture.py OUT.json LABELS_DIR RUN_DIR [RUN_DIR ...]

LABELS_DIR holds one folder a reader (named reader*), each with one `<run folder name>.json` a book
({"headings": {id: 0 or 1}, "sections": {id: 0 or 1}}, as examples/label_sheet.py asks). Where readers disagree,
the label is the majority's; a tie is 0 (a reader who calls it off was not served). Each section keeps its title,
point and opening (what the judge reads) and its label; each heading its level, title and label. The rule the
readers followed is copied in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.journal import read_journal  # noqa: E402
from pipeline.meaning.onsubject import opening  # noqa: E402


def majority(votes: list[int]) -> bool:
    return sum(votes) * 2 > len(votes)


def book_entry(run: Path, readers: list[Path]) -> dict:
    spec = json.loads((run / "spec.json").read_text())
    outline = json.loads((run / "outline.json").read_text())
    texts = {id_: result.text or "" for id_, result in read_journal(run / "sections.jsonl").items()}
    labels = [json.loads((reader / f"{run.name}.json").read_text()) for reader in readers]
    headings, sections = [], []
    for part in outline["parts"]:
        nodes = [("part", part)] + [
            item
            for chapter in part["chapters"]
            for item in [("chapter", chapter)] + [("section", s) for s in chapter["sections"]]
        ]
        for level, node in nodes:
            votes = [int(label["headings"][node["id"]]) for label in labels]
            headings.append({"id": node["id"], "level": level, "title": node["title"], "on_subject": majority(votes)})
            if level == "section":
                votes = [int(label["sections"][node["id"]]) for label in labels]
                sections.append(
                    {
                        "id": node["id"],
                        "title": node["title"],
                        "point": node.get("point", ""),
                        "text": opening(texts.get(node["id"], "")),
                        "on_subject": majority(votes),
                        "votes": votes,
                    }
                )
    return {
        "book": run.name,
        "request": spec["prompt"],
        "title": outline["title"],
        "headings": headings,
        "sections": sections,
    }


def main(argv: list[str]) -> int:
    out, labels, runs = Path(argv[0]), Path(argv[1]), [Path(folder) for folder in argv[2:]]
    readers = sorted(folder for folder in labels.iterdir() if folder.is_dir() and folder.name.startswith("reader"))
    rule = (labels / "RULE.md").read_text()
    books = [book_entry(run, readers) for run in runs]
    about = (
        f"Books written by fanout on the embedded engine (SmolLM2-135M, 2x3x4), read by {len(readers)} readers "
        "each (the majority's label; a tie is off) by the rule in 'rule'. Each section's text is its opening, as "
        "pipeline/meaning/onsubject.py judges it; 'votes' are the readers' labels."
    )
    out.write_text(json.dumps({"about": about, "rule": rule, "books": books}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
