"""Source paths -> a SourceIndex and a SourceReport: what was read, what was skipped and why, whether the index
was reused.

The files are found (read.files_under) and each is hashed as it streams, HASH_CHUNK_BYTES at a time; the index's key
is those digests with each file's name as shown, the passage rules (`passage_rules`: a digest of the source of the
modules that decide how a file becomes passages, and of the parsers' versions) and the embedder's name. An index
saved under the key is loaded: no file is read whole, parsed or embedded again. Otherwise each file is read whole
once, parsed, cut into passages, indexed and saved (under the key of the bytes it read). No readable source at all
is a UsageError (exit 2) naming what was skipped.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import json
import logging
from collections import Counter
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.files import cache_dir
from pipeline.meaning.embed import Embedder
from pipeline.records.sources import Passage, Skipped, SourceFile, SourceReport
from pipeline.sources.index import SourceIndex
from pipeline.sources.passages import passages_of
from pipeline.sources.read import NOT_A_KIND, Unreadable, files_under, parse_file, too_large

log = logging.getLogger("fanout")
# the modules that decide how a file becomes passages; the package's modules they import (the text helpers, the
# records) are rules too (rule_modules)
PASSAGE_RULES = ("pipeline.sources.read", "pipeline.sources.passages")
PARSERS = ("markdown-it-py", "lxml", "pypdf")  # the libraries that read the files: their versions are rules too
PACKAGE = "pipeline"
HASH_CHUNK_BYTES = 1 << 20  # a file is hashed 1 MiB at a time, so that its key never needs it whole in memory
REPORT_FILE = "report.json"


@dataclass(frozen=True, slots=True)
class Sources:
    index: SourceIndex
    report: SourceReport


def sources_folder() -> Path:
    return cache_dir() / "sources"


@dataclass(frozen=True, slots=True)
class Found:
    """A file to read: its name as shown, its path, and the digest of its bytes."""

    shown: str
    path: Path
    digest: str


def open_sources(paths: list[Path], embedder: Embedder) -> Sources:
    """The index of the readable files under `paths` (loaded when saved before), and its report."""
    found, skipped = _found_files(paths)
    folder = sources_folder() / index_key(found, embedder)
    if (folder / REPORT_FILE).is_file():
        report = _load_report(folder)
        report.reused = True
        report.skipped = skipped + report.skipped
        return Sources(SourceIndex.load(folder, embedder), report)
    passages, report, read = _read_all(found)
    report.skipped = skipped + report.skipped
    if not passages:
        raise UsageError(_nothing_read(paths, report.skipped))
    index = SourceIndex.build(passages, embedder)
    own_skips = report.skipped[len(skipped) :]
    saved = {"read": [asdict(file) for file in report.read], "skipped": [asdict(skip) for skip in own_skips]}
    index.save(sources_folder() / index_key(read, embedder), beside={REPORT_FILE: json.dumps(saved)})
    return Sources(index, report)


def _found_files(paths: list[Path]) -> tuple[list[Found], list[Skipped]]:
    """Each file found, hashed as it streams, and the paths skipped before reading."""
    found: list[Found] = []
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
            found.append(Found(shown, path, file_digest(path)))
        except OSError as error:
            skipped.append(_unreadable(shown, error))
    return found, skipped


def _unreadable(shown: str, error: OSError) -> Skipped:
    return Skipped(shown, (error.strerror or "cannot be read").lower())


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, read HASH_CHUNK_BYTES at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def index_key(found: list[Found], embedder: Embedder) -> str:
    digest = hashlib.sha256(f"{passage_rules()}\n{embedder.name}\n".encode())
    for file in found:
        digest.update(f"{file.shown}\n{file.digest}\n".encode())
    return digest.hexdigest()[:32]


def passage_rules() -> str:
    """A digest of what decides how files become passages: the source of every module of rule_modules() and the
    versions of PARSERS. Any change to them is a new key, so an index is never reused across one."""
    digest = hashlib.sha256()
    for name in rule_modules():
        digest.update(f"{name}\n{_source(name)}\n".encode())
    for parser in PARSERS:
        digest.update(f"{parser} {_version(parser)}\n".encode())
    return digest.hexdigest()


def rule_modules(roots: tuple[str, ...] = PASSAGE_RULES) -> list[str]:
    """`roots` and every module of the package they import, directly or not (imports inside functions too), by
    name."""
    seen: set[str] = set()
    waiting = list(roots)
    while waiting:
        name = waiting.pop()
        if name not in seen:
            seen.add(name)
            waiting += _package_imports(name)
    return sorted(seen)


def _package_imports(name: str) -> list[str]:
    """The package's modules that module `name` imports (a name imported from a package that is a module of its
    own counts as that module)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(_source(name))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _in_package(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and _in_package(node.module):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [node.module, *(name for name in names if _is_module(name))]
    return found


def _in_package(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _source(name: str) -> str:
    return inspect.getsource(importlib.import_module(name))


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "absent"


def _read_all(found: list[Found]) -> tuple[list[Passage], SourceReport, list[Found]]:
    """The passages of every file (each read whole once), what was read and skipped, and the files as read: their
    digests of the bytes parsed (a file changed since it was hashed is indexed as it is now)."""
    passages: list[Passage] = []
    report = SourceReport()
    read: list[Found] = []
    for file in found:
        try:
            data = file.path.read_bytes()
        except OSError as error:
            report.skipped.append(_unreadable(file.shown, error))
            continue
        read.append(replace(file, digest=hashlib.sha256(data).hexdigest()))
        try:
            source, blocks = parse_file(data, file.path, file.shown)
        except Unreadable as why:
            report.skipped.append(Skipped(file.shown, str(why)))
            continue
        own = passages_of(source.file, blocks, first=len(passages))
        if not own:
            report.skipped.append(Skipped(file.shown, "no text"))
            continue
        passages += own
        report.read.append(replace(source, passages=len(own)))
    return passages, report, read


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
