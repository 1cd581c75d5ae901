"""The sentence encoder on onnxruntime (pipeline/meaning/minilm.py): texts padded into one batch come out as each does
alone, and the graph is written into the cache once."""

from __future__ import annotations

import numpy as np

from pipeline.meaning.minilm import BATCH, MiniLMEmbedder, graph_file


def test_a_batch_embeds_each_text_as_it_is_embedded_alone():
    judge = MiniLMEmbedder(threads=1)
    texts = ["", "Tools", "That is a happy person", "Hidden Cost Review: how to review hidden costs " * 20]
    texts += [f"Section {number}: how the starter is fed on day {number}." for number in range(BATCH * 2)]
    together = judge._embed(texts)
    alone = np.concatenate([judge._embed([text]) for text in texts])
    assert together.shape == (len(texts), judge.dimensions)
    assert float(np.abs(together - alone).max()) < 1e-5


def test_the_graph_is_written_once_and_then_read_from_the_cache():
    path = graph_file()
    written = path.stat().st_mtime_ns
    MiniLMEmbedder(threads=1)
    assert graph_file() == path and path.stat().st_mtime_ns == written
