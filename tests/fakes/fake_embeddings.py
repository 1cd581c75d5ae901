"""A FAKE OpenAI-compatible `/v1/embeddings` server, for tests of the endpoint embedder: not a model, it gives
each text a fixed 8-number vector from a hash of its bytes (the same text, the same vector), lists one model,
and records the size of every batch it was sent. Served by a thread on 127.0.0.1; use as a context manager."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pipeline.meaning.embed import Embedder, Vectors

MODEL = "fake-embed"
DIMENSIONS = 8


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [byte / 255 - 0.5 for byte in digest[:DIMENSIONS]]


class FakeEmbeddings:
    def __init__(self) -> None:
        self.batches: list[int] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self.reply({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                fake.batches.append(len(texts))
                data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)]
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                self.reply({"object": "list", "model": body["model"], "data": data[::-1], "usage": usage})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeEmbeddings:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class CountingEmbedder:
    """A FAKE judge for the writer's tests: another Embedder's vectors, with every text it was asked to embed
    counted (`texts`)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = f"counting {inner.name}"
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.embed(texts)
