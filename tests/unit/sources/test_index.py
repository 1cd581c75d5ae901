"""Passages and the index: passages never cross a heading and stay near their size; the index finds a passage by
its words and by its meaning, is saved and reused by content, and built again when a file changes
(pipeline/sources/passages.py, index.py, collect.py)."""

from __future__ import annotations

import time

from pipeline.meaning.embed import open_embedder
from pipeline.records.sources import Query
from pipeline.sources.collect import open_sources, sources_folder
from pipeline.sources.index import LEXICAL, MEANING, SourceIndex
from pipeline.sources.passages import MAX_PASSAGE_WORDS, PASSAGE_WORDS, passages_of
from pipeline.sources.read import Block, FileText

TOPICS = {
    "Sharpening": "Hold the blade at fifteen degrees against a whetstone and draw it across in long even strokes.",
    "Storage": "Keep knives in a wooden block or on a magnetic strip so the edges never touch other metal.",
    "Bread": "A serrated knife saws through a crusty loaf without crushing the soft crumb inside it.",
    "Safety": "Curl the fingers of the guiding hand into a claw so the knuckles, not the fingertips, face the edge.",
}


def knife_file() -> FileText:
    blocks = [Block(("Knives", title), text) for title, text in TOPICS.items()]
    return FileText("knives.md", "markdown", blocks)


def test_passages_keep_to_their_heading_and_size():
    sentence = "The stone must be soaked in water for ten minutes before use. "
    blocks = [Block(("A",), sentence * 30), Block(("A",), "Short one."), Block(("B",), "Other heading.")]
    passages = passages_of(FileText("f.md", "markdown", blocks), first=7)
    assert [p.number for p in passages] == list(range(7, 7 + len(passages)))
    assert {p.headings for p in passages} == {("A",), ("B",)} and passages[-1].text == "Other heading."
    assert all(len(p.text.split()) <= MAX_PASSAGE_WORDS for p in passages)
    assert all(p.text.endswith(".") for p in passages)  # cut at sentences
    assert len(passages) >= 30 * 12 // PASSAGE_WORDS


def test_found_by_words_by_meaning_and_fused():
    index = SourceIndex.build(passages_of(knife_file()), open_embedder())
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
