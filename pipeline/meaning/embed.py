"""Meaning as vectors: one small interface, a static embedding model that ships in a PyPI wheel, and a
`/v1/embeddings` endpoint for a fleet that serves a real embedding model.

An Embedder takes texts and returns one unit-length row each (float32), so a dot product is a cosine.
Both kinds cache every text they have embedded: a title is compared many times while a book is planned.

- `StaticEmbedder` reads wordllama's files (wordllama 0.4.0.post1, MIT: a 32,000-token vocabulary and its
  16 MB `l2_supercat_256` table inside the wheel) and embeds a text as the mean of its tokens' rows, which is
  what wordllama's own `embed` does. The package is not imported: its `__init__` calls
  `logging.basicConfig(level=INFO)`, which would print fanout's own log records on stderr; and its loader looks
  for the tokenizer under a folder the wheel does not use (`tokenizer/` for `tokenizers/`), then downloads. The
  two files are opened from the installed package's folder, located without importing it, and nothing is
  ever downloaded. Texts are lower-cased first: the table is case-sensitive and was trained on lower case.
  A text's embedding takes about 10 µs a token on one core.
- `EndpointEmbedder` asks an OpenAI-compatible `/v1/embeddings` (vLLM, TEI, llama-server `--embeddings`,
  Ollama) through the openai SDK, in batches; the SDK's retries stay on (an embedding call is idempotent).

`open_embedder(setting)` chooses: None or "wordllama" -> the static model; `URL[,model=NAME][,key_env=VAR]`
-> the endpoint. A missing model file or an unreachable endpoint is one UsageError line (exit 2).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import anyio
import numpy as np
import numpy.typing as npt

from pipeline.cpu import Stage, stage
from pipeline.errors import UsageError

Vectors = npt.NDArray[np.float32]
WORDLLAMA = "wordllama"
WORDLLAMA_PIN = "wordllama==0.4.0.post1"
TOKENIZER_FILE = Path("tokenizers") / "l2_supercat_tokenizer_config.json"
WEIGHTS_FILE = Path("weights") / "l2_supercat_256.safetensors"
WEIGHTS_KEY = "embedding.weight"
MAX_TOKENS = 2048  # a text past this is embedded from its first 2,048 tokens (a section is about 400)
ENDPOINT_BATCH = 64


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length row per text (a zero row for a text with no tokens)."""
        ...


def unit_rows(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class CachedEmbedder:
    """The cache both kinds share: each distinct text is embedded once."""

    name = ""

    def __init__(self) -> None:
        self.cache: dict[str, Vectors] = {}
        self.dimensions = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        fresh = list(dict.fromkeys(text for text in texts if text not in self.cache))
        if fresh:
            with stage(Stage.EMBEDDINGS):
                rows = self._embed(fresh)
            for text, row in zip(fresh, rows):
                self.cache[text] = row
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self.cache[text] for text in texts])

    def embed_fresh(self, texts: Sequence[str]) -> Vectors:
        """Embed without keeping the rows (a source index's many passages, each embedded once)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with stage(Stage.EMBEDDINGS):
            return self._embed(list(texts))

    def _embed(self, texts: list[str]) -> Vectors:
        raise NotImplementedError


class EmbedAhead:
    """Embeds texts into an embedder's cache on a worker thread, so that the event loop's own `embed` of them later
    is a lookup. Texts asked while a pass runs go together in the next one (one pass at a time): many callers'
    few texts become one packed batch. numpy's matrix products release the GIL, so the pass runs on a second core
    while the event loop reads streams. An embedder without a cache (no CachedEmbedder) is left alone."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder if isinstance(embedder, CachedEmbedder) else None
        self.waiting: list[str] = []
        self.passed: anyio.Event | None = None  # set when the pass that takes `waiting` ends
        self.one_pass = anyio.Lock()

    async def embed(self, texts: Sequence[str]) -> None:
        """Return once every text is in the cache."""
        if self.embedder is None:
            return
        fresh = [text for text in texts if text not in self.embedder.cache]
        if not fresh:
            return
        self.waiting += fresh
        passed = self.passed = self.passed or anyio.Event()
        async with self.one_pass:
            if passed.is_set():  # an earlier caller's pass took these texts too
                return
            batch, self.waiting, self.passed = self.waiting, [], None
            try:
                await anyio.to_thread.run_sync(self.embedder.embed, batch)
            except Exception:  # noqa: BLE001 - a text the model cannot take fails the whole pass: a pass is only
                pass  # ahead of time, so its texts are left to the caller's own embed, which says why
            finally:
                passed.set()


def wordllama_folder() -> Path:
    """The installed wordllama package's folder, found without importing it."""
    spec = importlib.util.find_spec(WORDLLAMA)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise UsageError(f"the meaning model is not installed: pip install '{WORDLLAMA_PIN}'")
    return Path(locations[0])


class StaticEmbedder(CachedEmbedder):
    """wordllama's token table, mean-pooled: fast, deterministic, on the CPU."""

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__()
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = folder or wordllama_folder()
        tokenizer, weights = folder / TOKENIZER_FILE, folder / WEIGHTS_FILE
        for path in (tokenizer, weights):
            if not path.is_file():
                raise UsageError(f"the meaning model's file {path} is missing: reinstall '{WORDLLAMA_PIN}'")
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.table = load_file(str(weights))[WEIGHTS_KEY].astype(np.float32)
        self.dimensions = self.table.shape[1]
        self.name = f"{WORDLLAMA} l2_supercat_{self.dimensions}"

    def _embed(self, texts: list[str]) -> Vectors:
        rows = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        encoded = self.tokenizer.encode_batch([text.lower() for text in texts], add_special_tokens=False)
        for index, encoding in enumerate(encoded):
            ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, len(self.table) - 1)
            if len(ids):
                rows[index] = self.table[ids].mean(axis=0)
        return unit_rows(rows)


class EndpointEmbedder(CachedEmbedder):
    """An OpenAI-compatible `/v1/embeddings` endpoint, asked in batches."""

    def __init__(self, base_url: str, model: str | None = None, key_env: str | None = None) -> None:
        super().__init__()
        from openai import OpenAI, OpenAIError

        key = os.environ.get(key_env or "OPENAI_API_KEY") or "none"
        self.client = OpenAI(base_url=base_url, api_key=key, timeout=60.0)
        self.base_url = base_url
        try:
            self.model = model or self.client.models.list().data[0].id
        except (OpenAIError, IndexError) as exc:
            raise UsageError(f"setting 'embeddings' {base_url}: no model listed there ({exc})") from None
        self.name = f"{self.model} at {base_url}"

    def _embed(self, texts: list[str]) -> Vectors:
        from openai import OpenAIError

        rows: list[list[float]] = []
        for start in range(0, len(texts), ENDPOINT_BATCH):
            batch = [text or " " for text in texts[start : start + ENDPOINT_BATCH]]
            try:
                answer = self.client.embeddings.create(model=self.model, input=batch)
            except OpenAIError as exc:
                raise UsageError(f"setting 'embeddings' {self.base_url}: {exc}") from None
            rows += [item.embedding for item in sorted(answer.data, key=lambda item: item.index)]
        matrix = unit_rows(np.asarray(rows, dtype=np.float32))
        self.dimensions = matrix.shape[1]
        return matrix


def parse_endpoint(setting: str) -> tuple[str, str | None, str | None]:
    """`URL[,model=NAME][,key_env=VAR]` -> (url, model, key_env)."""
    url, *options = [piece.strip() for piece in setting.split(",")]
    values: dict[str, str] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key not in ("model", "key_env") or not value:
            raise UsageError(f"setting 'embeddings': unknown option {option!r} (model=NAME, key_env=VAR)")
        values[key] = value
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"setting 'embeddings': {url!r} is neither '{WORDLLAMA}' nor an http(s) URL")
    return url, values.get("model"), values.get("key_env")


@cache
def open_embedder(setting: str | None = None) -> Embedder:
    """The embedder a setting names (one per process and setting: the static table is loaded once)."""
    if setting in (None, "", WORDLLAMA):
        return StaticEmbedder()
    assert setting is not None
    return EndpointEmbedder(*parse_endpoint(setting))
