"""EmbedAhead: texts embedded on a worker thread into the embedder's cache, many callers' texts in one pass."""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

from pipeline.meaning.embed import CachedEmbedder, EmbedAhead, Vectors

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


class CountingEmbedder(CachedEmbedder):
    """A FAKE embedder: each text a row of its length; it counts its passes and notes the thread of each, and its
    first pass waits until `release` is set, so that other callers ask meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.dimensions = 2
        self.passes: list[list[str]] = []
        self.threads: list[int] = []
        self.release = threading.Event()

    def _embed(self, texts: list[str]) -> Vectors:
        self.passes.append(texts)
        self.threads.append(threading.get_ident())
        if len(self.passes) == 1:
            self.release.wait(timeout=10)
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)


async def test_texts_asked_during_a_pass_go_together_in_the_next_and_land_in_the_cache():
    embedder = CountingEmbedder()
    ahead = EmbedAhead(embedder)
    async with anyio.create_task_group() as group:
        group.start_soon(ahead.embed, ["first"])
        await anyio.sleep(0.05)  # the first pass is under way, held
        for text in ("a", "bb", "ccc"):
            group.start_soon(ahead.embed, [text, "first"])
        await anyio.sleep(0.05)
        embedder.release.set()
    assert embedder.passes == [["first"], ["a", "bb", "ccc"]], "one pass for the three callers, 'first' not again"
    assert set(embedder.cache) == {"first", "a", "bb", "ccc"}
    assert threading.get_ident() not in embedder.threads, "off the event loop's thread"


async def test_cached_texts_and_an_embedder_without_a_cache_ask_no_pass():
    embedder = CountingEmbedder()
    embedder.release.set()
    embedder.embed(["known"])
    await EmbedAhead(embedder).embed(["known"])
    assert len(embedder.passes) == 1

    class Plain:
        name = "plain"

        def embed(self, texts):
            raise AssertionError("not asked ahead")

    await EmbedAhead(Plain()).embed(["x"])
