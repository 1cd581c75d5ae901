"""Passages and the index: passages never cross a heading and stay near their size, a code block (``` or ~~~) cut at
its lines and fenced again; the index finds a passage by its words and by its meaning, is saved and reused by
content, and built again when a file changes (pipeline/sources/passages.py, index.py, collect.py); its key follows
the passage rules and the files' bytes, hashed as they stream, and a reused index reads no file whole."""

from __future__ import annotations

import hashlib
import inspect
import time
from pathlib import Path

import pytest

from pipeline.meaning.embed import open_embedder
from pipeline.records.sources import Query
from pipeline.sources import collect
from pipeline.sources.collect import Found, file_digest, index_key, open_sources, rule_modules, sources_folder
from pipeline.sources.index import LEXICAL, MEANING, SourceIndex
from pipeline.sources.passages import MAX_PASSAGE_WORDS, PASSAGE_WORDS, passages_of
from pipeline.sources.read import Block

TOPICS = {
    "Sharpening": "Hold the blade at fifteen degrees against a whetstone and draw it across in long even strokes.",
    "Storage": "Keep knives in a wooden block or on a magnetic strip so the edges never touch other metal.",
    "Bread": "A serrated knife saws through a crusty loaf without crushing the soft crumb inside it.",
    "Safety": "Curl the fingers of the guiding hand into a claw so the knuckles, not the fingertips, face the edge.",
}


def knife_blocks() -> list[Block]:
    return [Block(("Knives", title), text) for title, text in TOPICS.items()]


def test_passages_keep_to_their_heading_and_size():
    sentence = "The stone must be soaked in water for ten minutes before use. "
    blocks = [Block(("A",), sentence * 30), Block(("A",), "Short one."), Block(("B",), "Other heading.")]
    passages = passages_of("f.md", blocks, first=7)
    assert [p.number for p in passages] == list(range(7, 7 + len(passages)))
    assert {p.headings for p in passages} == {("A",), ("B",)} and passages[-1].text == "Other heading."
    assert all(len(p.text.split()) <= MAX_PASSAGE_WORDS for p in passages)
    assert all(p.text.endswith(".") for p in passages)  # cut at sentences
    assert len(passages) >= 30 * 12 // PASSAGE_WORDS


def code_block(fence: str) -> str:
    lines = [f"x{n} = sharpen(knife, angle=15)  # stroke {n}" for n in range(120)]
    return "\n".join([f"{fence}python", *lines, fence])


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_a_long_code_block_is_cut_at_its_lines_each_piece_fenced_again_with_its_own_fence(fence):
    passages = passages_of("f.md", [Block(("A",), code_block(fence))])
    assert len(passages) >= 120 * 5 // MAX_PASSAGE_WORDS and all(p.headings == ("A",) for p in passages)
    assert all(p.text.startswith(f"{fence}python\n") and p.text.endswith(f"\n{fence}") for p in passages)
    inner = [line for p in passages for line in p.text.split("\n")[1:-1]]
    assert inner == code_block(fence).split("\n")[1:-1]  # every line once, whole, in order
    backticks = passages_of("f.md", [Block(("A",), code_block("```"))])
    assert [p.text.replace(fence, "```") for p in passages] == [p.text for p in backticks]


@pytest.mark.parametrize("fence", ["```", "~~~"])
def test_a_long_paragraph_that_only_starts_with_a_fence_is_prose(fence):
    """A text file's paragraph read as one line: a reStructuredText heading's overline and what follows it."""
    text = f"{fence} Keeping knives {fence} " + "The stone must be soaked in water for ten minutes before use. " * 30
    passages = passages_of("f.txt", [Block(("A",), text.strip())])
    assert " ".join(p.text for p in passages).split() == text.split()  # nothing left out, cut at sentences
    assert len(passages) > 1 and all(p.text.endswith(".") for p in passages[1:])


def test_found_by_words_by_meaning_and_fused():
    index = SourceIndex.build(passages_of("knives.md", knife_blocks()), open_embedder())
    assert index.search(Query("whetstone angle"), 1, by=LEXICAL)[0].passage.headings[-1] == "Sharpening"
    assert index.search(Query("slicing a loaf"), 1, by=MEANING)[0].passage.headings[-1] == "Bread"
    hits = index.search(Query("Where to keep your knives", "Looking after knives"), 4)
    assert hits[0].passage.headings[-1] == "Storage" and len(hits) == 4
    assert hits[0].score == 1.0 >= hits[1].score


def test_saved_reused_and_rebuilt_when_a_file_changes(tmp_path):
    source = tmp_path / "knives.md"
    source.write_text("# Knives\n\n" + "\n\n".join(f"## {title}\n\n{text}" for title, text in TOPICS.items()))
    first = open_sources([source], open_embedder())
    assert not first.report.reused and len(list(sources_folder().iterdir())) == 1
    again = open_sources([source], open_embedder())
    assert again.report.reused and again.report.read == first.report.read
    query = Query("Keeping the edge")
    assert [h.passage for h in again.index.search(query)] == [h.passage for h in first.index.search(query)]
    time.sleep(0.01)
    source.write_text(source.read_text() + "\n## Oiling\n\nA drop of mineral oil keeps carbon steel from rust.\n")
    changed = open_sources([source], open_embedder())
    assert not changed.report.reused and changed.report.passages == first.report.passages + 1
    assert not [p for p in sources_folder().iterdir() if p.name.startswith(".")]  # no half-written index left


def knives_key(tmp_path: Path) -> str:
    source = tmp_path / "knives.md"
    if not source.exists():
        source.write_text("# Knives\n\n" + "\n\n".join(f"## {title}\n\n{text}" for title, text in TOPICS.items()))
    return index_key([Found("knives.md", source, file_digest(source))], open_embedder())


def changed_source(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect.getsource reads `module` with one more line, as if its file had been edited."""
    real = inspect.getsource
    monkeypatch.setattr(inspect, "getsource", lambda obj: real(obj) + ("\nX = 1\n" if obj.__name__ == module else ""))


@pytest.mark.parametrize("module", ["pipeline.sources.passages", "pipeline.sources.read", "pipeline.document"])
def test_a_change_to_the_passage_rules_is_a_new_key(tmp_path, monkeypatch, module):
    key = knives_key(tmp_path)
    assert knives_key(tmp_path) == key  # the same rules, the same files: the same key
    assert module in rule_modules()  # read.py, passages.py and the text helpers they import
    changed_source(module, monkeypatch)
    assert knives_key(tmp_path) != key


def test_what_does_not_cut_passages_keeps_the_key_and_a_parser_version_changes_it(tmp_path, monkeypatch):
    key = knives_key(tmp_path)
    changed_source("pipeline.sources.index", monkeypatch)  # how passages are searched, not how they are cut
    assert "pipeline.sources.index" not in rule_modules() and knives_key(tmp_path) == key
    real = collect.version
    monkeypatch.setattr(collect, "version", lambda name: "99.0" if name == "pypdf" else real(name))
    assert knives_key(tmp_path) != key


def test_files_are_hashed_in_chunks_and_a_reused_index_reads_none_whole(tmp_path, monkeypatch):
    source = tmp_path / "knives.md"
    source.write_text("# Knives\n\n" + "\n\n".join(f"## {title}\n\n{text}" for title, text in TOPICS.items()))
    monkeypatch.setattr(collect, "HASH_CHUNK_BYTES", 7)
    assert file_digest(source) == hashlib.sha256(source.read_bytes()).hexdigest()
    first = open_sources([source], open_embedder())

    def whole(path: Path) -> bytes:
        raise AssertionError(f"{path} read whole")

    monkeypatch.setattr(Path, "read_bytes", whole)
    again = open_sources([source], open_embedder())
    assert again.report.reused and again.report.read == first.report.read
