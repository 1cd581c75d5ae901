"""The sentence encoder's forward pass (pipeline/meaning/minilm.py): texts packed into one pass share the dense
layers' matrix products, and each comes out as it does alone."""

from __future__ import annotations

import numpy as np

from pipeline.meaning.minilm import PASS_TOKENS, MiniLMEmbedder


def test_a_batch_embeds_each_text_as_it_is_embedded_alone():
    judge = MiniLMEmbedder()
    texts = ["", "Tools", "That is a happy person", "Hidden Cost Review: how to review hidden costs " * 20]
    texts += [f"Section {number}: how the starter is fed on day {number}." for number in range(PASS_TOKENS // 8)]
    together = judge._embed(texts)
    alone = np.concatenate([judge._embed([text]) for text in texts])
    assert together.shape == (len(texts), judge.dimensions)
    assert float(np.abs(together - alone).max()) < 1e-5
