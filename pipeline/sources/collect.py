"""Source paths -> a SourceIndex and a SourceReport: what was read, what was skipped and why, whether the index
was reused.

The files are found (read.files_under), each read as bytes once and hashed; the index's key is those hashes with
each file's name as shown, the passage rules (PASSAGE_FORMAT) and the embedder's name. An index saved under the key
is loaded (nothing parsed or embedded again); otherwise the files are parsed, cut into passages, indexed and saved.
No readable source at all is a UsageError (exit 2) naming what was skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.files import cache_dir
from pipeline.meaning.embed import Embedder
from pipeline.records.sources import Passage, Skipped, SourceFile, SourceReport
from pipeline.sources.index import SourceIndex
from pipeline.sources.passages import MAX_PASSAGE_WORDS, PASSAGE_WORDS, passages_of
from pipeline.sources.read import NOT_A_KIND, Unreadable, files_under, parse_file, too_large

log = logging.getLogger("fanout")
PASSAGE_FORMAT = f"passages-2:{PASSAGE_WORDS}:{MAX_PASSAGE_WORDS}"  # a change to read.py or passages.py changes it
REPORT_FILE = "report.json"


@dataclass(frozen=True, slots=True)
class Sources:
    index: SourceIndex
    report: SourceReport


def sources_folder() -> Path:
    return cache_dir() / "sources"


def open_sources(paths: list[Path], embedder: Embedder) -> Sources:
    """The index of the readable files under `paths` (loaded when saved before), and its report."""
    found, skipped = _found_files(paths)
    key = index_key(found, embedder)
    folder = sources_folder() / key
    if (folder / REPORT_FILE).is_file():
        report = _load_report(folder)
        report.reused = True
        report.skipped = skipped + report.skipped
        return Sources(SourceIndex.load(folder, embedder), report)
    passages, report = _read_all(found)
    report.skipped = skipped + report.skipped
    if not passages:
        raise UsageError(_nothing_read(paths, report.skipped))
    index = SourceIndex.build(passages, embedder)
    own_skips = report.skipped[len(skipped) :]
    saved = {"read": [asdict(file) for file in report.read], "skipped": [asdict(skip) for skip in own_skips]}
    index.save(folder, beside={REPORT_FILE: json.dumps(saved)})
    return Sources(index, report)


def _found_files(paths: list[Path]) -> tuple[list[tuple[str, bytes, Path]], list[Skipped]]:
    """(name as shown, its bytes, path) of each file found, and the paths skipped before reading."""
    found: list[tuple[str, bytes, Path]] = []
    skipped: list[Skipped] = []
    for item in files_under(paths):
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        path, shown = item
        try:
            if why := too_large(path.stat().st_size):
                skipped.append(Skipped(shown, why))
                continue
            found.append((shown, path.read_bytes(), path))
        except OSError as error:
            skipped.append(Skipped(shown, (error.strerror or "cannot be read").lower()))
    return found, skipped


def index_key(found: list[tuple[str, bytes, Path]], embedder: Embedder) -> str:
    digest = hashlib.sha256(f"{PASSAGE_FORMAT}\n{embedder.name}\n".encode())
    for shown, data, _ in found:
        digest.update(f"{shown}\n{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()[:32]


def _read_all(found: list[tuple[str, bytes, Path]]) -> tuple[list[Passage], SourceReport]:
    passages: list[Passage] = []
    report = SourceReport()
    for shown, data, path in found:
        try:
            text = parse_file(data, path, shown)
        except Unreadable as why:
            report.skipped.append(Skipped(shown, str(why)))
            continue
        own = passages_of(text, first=len(passages))
        if not own:
            report.skipped.append(Skipped(shown, "no text"))
            continue
        passages += own
        report.read.append(SourceFile(shown, text.kind, len(own), text.pages))
    return passages, report


def skipped_lines(skipped: list[Skipped]) -> list[str]:
    """One line a skipped path, but the files of kinds fanout does not read: one line for them all, by suffix."""
    other = Counter(
        item.why.removeprefix(NOT_A_KIND).strip(" ()") for item in skipped if item.why.startswith(NOT_A_KIND)
    )
    lines = [item.line() for item in skipped if not item.why.startswith(NOT_A_KIND)]
    if other:
        kinds = ", ".join(f"{suffix} {count}" for suffix, count in other.most_common())
        lines.append(f"skipped {sum(other.values())} files of kinds fanout does not read ({kinds})")
    return lines


def _load_report(folder: Path) -> SourceReport:
    saved = json.loads((folder / REPORT_FILE).read_text())
    return SourceReport(
        read=[SourceFile(**item) for item in saved["read"]], skipped=[Skipped(**item) for item in saved["skipped"]]
    )


def _nothing_read(paths: list[Path], skipped: list[Skipped]) -> str:
    named = ", ".join(str(path) for path in paths[:3]) + (" ..." if len(paths) > 3 else "")
    if not skipped:
        return f"no source file in {named}"
    first = skipped[0]
    more = f" and {len(skipped) - 1} more skipped" if len(skipped) > 1 else ""
    return f"no readable source in {named}: {first.path}: {first.why}{more}"
