"""`fanout efficiency` (pipeline/bench/studies/efficiency.py): each job starts with the meaning models' caches
empty, so no schedule's job is served the texts an earlier job embedded."""

from __future__ import annotations

from pipeline.bench.studies.efficiency import cold_meaning
from pipeline.config import Settings
from pipeline.meaning.embed import StaticEmbedder, open_embedder


def test_each_job_starts_with_the_meaning_caches_empty():
    embedder = open_embedder()
    embedder.embed(["Feeding a starter", "Storing flour"])
    assert isinstance(embedder, StaticEmbedder) and embedder.cache
    cold_meaning(Settings(judge="none"))
    assert not embedder.cache and open_embedder() is embedder, "the model stays loaded, its cache is emptied"
