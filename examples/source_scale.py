"""How the sources stage scales: 10 MB of Markdown through `open_sources`, then a query's latency and the memory held
at 10k to 1M passages by brute force (pipeline/sources/index.py), and brute force beside nearest-neighbour indexes.

    PYTHONPATH=. .venv/bin/python examples/source_scale.py --work DIR [--ann-python VENV/bin/python]
        [--sizes 10000,100000,300000,1000000] [--ann-sizes 10000,100000,1000000]
    VENV/bin/python examples/source_scale.py --ann DIR [--ann-sizes ...]   # the last table alone, from DIR's vectors

VENV holds the nearest-neighbour libraries, which are not fanout's: `python3 -m venv VENV && VENV/bin/pip install
numpy usearch faiss-cpu`; without --ann-python the last table runs under this interpreter and skips them, saying
so. Everything is written under DIR: the Markdown, FANOUT_CACHE (DIR/cache, emptied first), the vectors. Printed as
Markdown tables:

1. `open_sources` on 10 MB of Markdown: the corpus's books (tests/fixtures/corpus/) as `book_markdown` writes them,
   with their headings, one file each, repeated under a "-2" suffix to reach 10 MB. Cold (read, cut, indexed,
   saved) and again (the saved index loaded), each in a fresh process: wall seconds, the RSS before the call (the
   package and the model's table loaded) and the peak during it (Linux's VmHWM, reset first). Then the cold
   build again, piece by piece through the public functions it is made of (files_under, file_digest, index_key,
   parse_file, passages_of; tokens; bm25s; embed_all; SourceIndex.save), each timed.
2. Query latency, p50 and p95 over QUERIES queries (a corpus section's title, its chapter's title and one of its
   book's two requests, spread evenly over the corpus): `SourceIndex.search` by each retriever (`by=`), and its two
   scorers alone (`lexical_scores`, `meaning_scores`). search scores by the retrievers `by` names (both for
   fused). The queries' texts are embedded before the clock starts, as the planner has embedded its titles before
   it asks.
3. Memory at each size, each in a fresh process: the vectors, bm25s's score matrix (data, indices, indptr), the
   passages' text; the RSS before the index is built (the package, the model's table and the corpus loaded), the
   RSS held once it is built and asked, and the peak between (bm25s's build included).
4. Brute force (numpy: float32 matmul; float16 storage, upcast to float32 in blocks, since numpy has no float16
   BLAS) against faiss IndexFlatIP, faiss IndexHNSWFlat (M=32; faiss's defaults efConstruction 40, efSearch 16)
   and a usearch Index with its defaults (cos, bf16 storage, connectivity 16, expansion add 128 and search 64):
   build seconds, one query's latency for k=100 (p50, p95), recall@10 against exact float32 brute force, and the
   index's bytes (the arrays; faiss HNSW serialised; usearch's memory_usage). Rows: the corpus's real vectors,
   then each size.

The sizes are synthetic past the corpus, said plainly: the corpus cuts into 6,571 distinct passages (5.2 MB). N
passages repeat them, each with its own copy of its text; BM25 indexes their real stems, repeated; the first 6,571
vectors are the real ones and each repeat is its source's vector plus Gaussian noise (NOISE a dimension),
re-normalised, which puts a copy about as near its source as a real passage is to its nearest other (both medians
printed). The query vectors are the queries' real embeddings, weighed as meaning_scores weighs them.

One thread everywhere, for fairness: OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are 1 before numpy is imported (the
client runs its BLAS on one thread too, pipeline/cpu.py), faiss.omp_set_num_threads(1), usearch threads=1, builds
and queries alike. The budget a fused query is held to is BUDGET_MS.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from types import ModuleType
from typing import Any

for _setting in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[_setting] = "1"  # before numpy is imported

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

try:
    import bm25s

    from pipeline.bench.studies.corpus import book_markdown, load_corpus
    from pipeline.meaning.embed import Embedder, open_embedder
    from pipeline.records.sources import Passage, Query, Skipped
    from pipeline.sources.collect import Found, file_digest, index_key, open_sources
    from pipeline.sources.index import FUSED, LEXICAL, MEANING, MEANING_WEIGHTS, SourceIndex, embed_all, tokens
    from pipeline.sources.passages import passages_of
    from pipeline.sources.places import SOURCE_PASSAGES
    from pipeline.sources.read import files_under, markdown_blocks, parse_file
except ModuleNotFoundError:
    if "--ann" not in sys.argv:  # --ann runs in a venv of numpy and the nearest-neighbour libraries alone
        raise

TARGET_BYTES = 10_000_000
QUERIES = 200
WARMUP = 3  # queries asked before the timed ones
NOISE = 0.05  # per dimension, on a unit row of 256
BUDGET_MS = 50.0
K = 100  # the nearest-neighbour table's depth
RECALL_AT = 10
F16_BLOCK = 65_536  # rows upcast at a time
HNSW_M = 32
MB = 1e6
REAL_FILE, QUERY_FILE = "real.npy", "queries.npy"

Row = dict[str, Any]


def memory(field: str) -> float:
    """This process's RSS ("VmRSS") or its peak since the last reset_peak ("VmHWM"), in MB (Linux)."""
    rows = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(rows[field].split()[0]) * 1024 / MB


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS starts again from the RSS now


def apart(function: Callable[..., Row], *args: Any) -> Row:
    """`function(*args)` in a fresh process, so that the peak RSS it reports is its own."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


@contextmanager
def timing(into: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    into[name] = time.perf_counter() - start


def timed(call: Callable[[Any], Any], queries: list[Any]) -> tuple[tuple[float, float], list[Any]]:
    """p50 and p95 of one call's milliseconds over the queries (after WARMUP untimed ones), and its answers."""
    for query in queries[:WARMUP]:
        call(query)
    times, answers = [], []
    for query in queries:
        start = time.perf_counter()
        answers.append(call(query))
        times.append(1000 * (time.perf_counter() - start))
    p50, p95 = np.percentile(times, [50, 95])
    return (float(p50), float(p95)), answers


def tiled(real: np.ndarray, size: int) -> np.ndarray:
    """`size` unit rows: the real ones, then copies of them with Gaussian noise (NOISE a dimension), re-normalised."""
    rows = np.resize(real, (size, real.shape[1]))
    noisy = rows[len(real) :]
    noisy += NOISE * np.random.default_rng(0).standard_normal(noisy.shape, dtype=np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    return rows


# 1. open_sources on 10 MB of Markdown


def write_markdown(folder: Path) -> int:
    """The corpus's books as Markdown files, repeated under a suffix until they hold TARGET_BYTES; their bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    books, written = load_corpus(), 0
    copies = ((copy, book) for copy in itertools.count(1) for book in books)
    while written < TARGET_BYTES:
        copy, book = next(copies)
        data = book_markdown(book).encode()
        (folder / f"{book.slug}{'' if copy == 1 else f'-{copy}'}.md").write_bytes(data)
        written += len(data)
    return written


def open_once(folder: Path) -> Row:
    embedder = open_embedder()
    reset_peak()
    before = memory("VmRSS")
    start = time.perf_counter()
    found = open_sources([folder], embedder)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "passages": found.report.passages,
        "reused": found.report.reused,
        "before": before,
        "peak": memory("VmHWM"),
    }


def read_passages(folder: Path, embedder: Embedder) -> list[Passage]:
    """What open_sources does before it indexes: each file hashed as it streams, their key; then each file read whole
    (its bytes hashed again, the key of what was read), parsed and cut into passages."""
    files = [item for item in files_under([folder]) if not isinstance(item, Skipped)]
    found = [Found(shown, path, file_digest(path)) for path, shown in files]
    index_key(found, embedder)
    passages: list[Passage] = []
    for file in found:
        data = file.path.read_bytes()
        hashlib.sha256(data).hexdigest()
        source, blocks = parse_file(data, file.path, file.shown)
        passages += passages_of(source.file, blocks, first=len(passages))
    return passages


def cold_pieces(folder: Path, saved: Path) -> Row:
    """The cold build's pieces, each through its public function, timed."""
    embedder = open_embedder()
    seconds: dict[str, float] = {}
    with timing(seconds, "read the files, hash them, parse the Markdown, cut passages"):
        passages = read_passages(folder, embedder)
    texts = [passage.indexed_text() for passage in passages]
    with timing(seconds, "tokenize (stems, stop words left out)"):
        stems = tokens(texts)
    with timing(seconds, "BM25 index (bm25s)"):
        lexical = bm25s.BM25()
        lexical.index(stems, show_progress=False)
    with timing(seconds, "embed (wordllama's static table, 256 dims)"):
        vectors = embed_all(embedder, texts)
    with timing(seconds, "save (bm25s, vectors.npy, passages.jsonl)"):
        SourceIndex(passages, lexical, vectors, embedder).save(saved)
    return seconds


def open_tables(work: Path) -> None:
    folder = work / "markdown"
    written = write_markdown(folder)
    runs = {"cold": apart(open_once, folder), "again (index reused)": apart(open_once, folder)}
    files = len(list(folder.glob("*.md")))
    print(f"## open_sources on {written / MB:.1f} MB of Markdown ({files} files)\n")
    print("| call | seconds | passages | reused | RSS before MB | peak RSS MB |\n|---|---|---|---|---|---|")
    for name, run in runs.items():
        print(
            f"| {name} | {run['seconds']:.2f} | {run['passages']:,} | {run['reused']} | {run['before']:.0f} | "
            f"{run['peak']:.0f} |"
        )
    pieces = apart(cold_pieces, folder, work / "pieces")
    total = sum(pieces.values())
    print("\n| piece of the cold build | seconds | share |\n|---|---|---|")
    for name, seconds in pieces.items():
        print(f"| {name} | {seconds:.2f} | {100 * seconds / total:.0f}% |")
    print(f"| sum | {total:.2f} | 100% |\n")


# 2 and 3. Query latency and memory at each size


def corpus_passages() -> list[Passage]:
    """The corpus's distinct passages: each book read as its Markdown, as `fanout sources` reads it."""
    found: list[Passage] = []
    for book in load_corpus():
        found += passages_of(f"{book.slug}.md", markdown_blocks(book_markdown(book)), first=len(found))
    return found


def corpus_queries() -> list[Query]:
    """QUERIES queries spread evenly over the corpus's sections, each book's two requests taken in turn."""
    every = [
        (book, chapter, section)
        for book in load_corpus()
        for part in book.parts
        for chapter in part.chapters
        for section in chapter.sections
    ]
    picked = [every[at * len(every) // QUERIES] for at in range(QUERIES)]
    requests = [(book.requests.plain, book.requests.topics)[at % 2] for at, (book, _, _) in enumerate(picked)]
    return [Query(section.title, chapter.title, request) for (_, chapter, section), request in zip(picked, requests)]


def query_vectors(embedder: Embedder, queries: list[Query]) -> np.ndarray:
    """Each query's unit vector: its parts' rows weighed by MEANING_WEIGHTS, as meaning_scores asks."""
    rows = []
    for query in queries:
        texts = [text for text in query.texts() if text]
        weights = np.asarray([weight for text, weight in zip(query.texts(), MEANING_WEIGHTS) if text], np.float32)
        mean = weights @ embedder.embed(texts)
        rows.append(mean / np.linalg.norm(mean))
    return np.stack(rows).astype(np.float32)


def save_vectors(work: Path) -> None:
    """The corpus's real vectors and the queries', for every size and the last table; the noise's effect said."""
    embedder = open_embedder()
    real = embed_all(embedder, [passage.indexed_text() for passage in corpus_passages()])
    np.save(work / REAL_FILE, real)
    np.save(work / QUERY_FILE, query_vectors(embedder, corpus_queries()))
    similar = real @ real.T
    np.fill_diagonal(similar, -1.0)
    copies = tiled(real, 2 * len(real))[len(real) :]
    print(
        f"Vectors past the corpus's {len(real):,}: median cosine of a copy to its source "
        f"{np.median((copies * real).sum(axis=1)):.2f}; of a real passage to its nearest other "
        f"{np.median(similar.max(axis=1)):.2f}.\n"
    )


def passages_at(base: list[Passage], size: int) -> list[Passage]:
    """`size` passages, the base's repeated, each holding its own copy of its text (as distinct passages would)."""
    return [
        Passage(at, p.file, p.headings, p.text.encode().decode(), p.page)
        for at, p in zip(range(size), itertools.cycle(base))
    ]


def latencies(index: SourceIndex, queries: list[Query]) -> dict[str, tuple[float, float]]:
    """Each call's p50 and p95, the query texts embedded beforehand (the planner has embedded its titles)."""
    index.embedder.embed([text for query in queries for text in query.texts() if text])
    calls: dict[str, Callable[[Query], object]] = {
        f"search by={by}": partial(index.search, k=SOURCE_PASSAGES, by=by) for by in (LEXICAL, MEANING, FUSED)
    }
    calls["lexical_scores alone"] = index.lexical_scores
    calls["meaning_scores alone"] = index.meaning_scores
    return {name: timed(call, queries)[0] for name, call in calls.items()}


def measure_size(size: int, work: Path) -> Row:
    """One size's index (module docstring: synthetic past the corpus), built, asked, and its memory."""
    embedder = open_embedder()
    base = corpus_passages()
    stems = tokens([passage.indexed_text() for passage in base])
    reset_peak()
    before = memory("VmRSS")
    passages = passages_at(base, size)
    start = time.perf_counter()
    lexical = bm25s.BM25()
    lexical.index([stems[at % len(stems)] for at in range(size)], show_progress=False)
    built = time.perf_counter() - start
    index = SourceIndex(passages, lexical, tiled(np.load(work / REAL_FILE), size), embedder)
    matrix = {part: lexical.scores[part].nbytes / MB for part in ("data", "indices", "indptr")}
    return {
        "latency": latencies(index, corpus_queries()),
        "bm25 s": built,
        "vectors": index.vectors.nbytes / MB,
        **matrix,
        "text": sum(sys.getsizeof(p.text) for p in passages) / MB,
        "before": before,
        "held": memory("VmRSS"),
        "peak": memory("VmHWM"),
    }


def size_tables(work: Path, sizes: list[int]) -> None:
    rows = {}
    for size in sizes:
        print(f"{size:,} passages ...", file=sys.stderr)
        rows[size] = apart(measure_size, size, work)
    print(f"## Query latency, brute force, {QUERIES} queries (ms; budget {BUDGET_MS:g} ms)\n")
    print("| passages | call | p50 | p95 |\n|---|---|---|---|")
    for size, row in rows.items():
        for name, (p50, p95) in row["latency"].items():
            print(f"| {size:,} | {name} | {p50:.1f} | {p95:.1f} |")
    print("\n## Memory at each size (MB)\n")
    print(
        "| passages | BM25 build s | vectors | BM25 data | BM25 indices | BM25 indptr | BM25 total | passage text | "
        "RSS before | RSS held | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for size, row in rows.items():
        bm25 = row["data"] + row["indices"] + row["indptr"]
        print(
            f"| {size:,} | {row['bm25 s']:.1f} | {row['vectors']:.0f} | {row['data']:.0f} | {row['indices']:.0f} | "
            f"{row['indptr']:.1f} | {bm25:.0f} | {row['text']:.0f} | {row['before']:.0f} | {row['held']:.0f} | "
            f"{row['peak']:.0f} |"
        )
    print()


# 4. Brute force against nearest-neighbour indexes

Search = Callable[[np.ndarray], np.ndarray]
Build = Callable[[np.ndarray], tuple[Search, Callable[[], int]]]  # a search, and its index's bytes once built


def optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        print(f"*{name} is not importable under {sys.executable}: its rows are skipped.*\n")
        return None


def best(scores: np.ndarray) -> np.ndarray:
    top = np.argpartition(-scores, K - 1)[:K]
    return top[np.argsort(-scores[top])]


def brute_f32(vectors: np.ndarray) -> tuple[Search, Callable[[], int]]:
    return lambda query: best(vectors @ query), lambda: vectors.nbytes


def brute_f16(vectors: np.ndarray) -> tuple[Search, Callable[[], int]]:
    half = vectors.astype(np.float16)

    def search(query: np.ndarray) -> np.ndarray:
        blocks = [half[at : at + F16_BLOCK].astype(np.float32) @ query for at in range(0, len(half), F16_BLOCK)]
        return best(np.concatenate(blocks))

    return search, lambda: half.nbytes


def faiss_builds(faiss: ModuleType) -> dict[str, Build]:
    faiss.omp_set_num_threads(1)

    def built(index: Any, vectors: np.ndarray) -> tuple[Search, Callable[[], int]]:
        index.add(vectors)
        return lambda query: index.search(query[None], K)[1][0], lambda: faiss.serialize_index(index).nbytes

    return {
        "faiss IndexFlatIP": lambda vectors: built(faiss.IndexFlatIP(vectors.shape[1]), vectors),
        f"faiss IndexHNSWFlat M={HNSW_M}": lambda vectors: built(
            faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT), vectors
        ),
    }


def usearch_build(usearch: ModuleType) -> dict[str, Build]:
    def build(vectors: np.ndarray) -> tuple[Search, Callable[[], int]]:
        index = usearch.Index(ndim=vectors.shape[1])
        index.add(np.arange(len(vectors)), vectors, threads=1)
        return lambda query: index.search(query, K, threads=1).keys, lambda: index.memory_usage

    return {"usearch HNSW (defaults)": build}


def ann_row(build: Build, vectors: np.ndarray, queries: np.ndarray) -> tuple[float, float, float, int, list[set[int]]]:
    """Build seconds, p50 and p95 ms, index bytes, and each query's first RECALL_AT found."""
    start = time.perf_counter()
    search, index_bytes = build(vectors)
    built = time.perf_counter() - start
    (p50, p95), answers = timed(search, list(queries))
    return built, p50, p95, index_bytes(), [set(answer[:RECALL_AT].tolist()) for answer in answers]


def ann_tables(work: Path, sizes: list[int]) -> None:
    real, queries = np.load(work / REAL_FILE), np.load(work / QUERY_FILE)
    builds: dict[str, Build] = {"numpy float32 brute force": brute_f32, "numpy float16 storage": brute_f16}
    faiss, usearch = optional("faiss"), optional("usearch.index")
    builds |= faiss_builds(faiss) if faiss else {}
    builds |= usearch_build(usearch) if usearch else {}
    print(f"## Brute force against nearest-neighbour indexes ({len(queries)} queries, k={K}, one thread)\n")
    print(f"| vectors | method | build s | p50 ms | p95 ms | recall@{RECALL_AT} | index MB |")
    print("|---|---|---|---|---|---|---|")
    for label, size in [(f"{len(real):,} (real)", len(real))] + [(f"{size:,}", size) for size in sizes]:
        vectors, exact = tiled(real, size), None
        for name, build in builds.items():
            print(f"{label} {name} ...", file=sys.stderr)
            built, p50, p95, nbytes, found = ann_row(build, vectors, queries)
            exact = exact or found  # the first, float32 brute force, is exact
            recall = np.mean([len(got & truth) / RECALL_AT for got, truth in zip(found, exact)])
            print(f"| {label} | {name} | {built:.2f} | {p50:.2f} | {p95:.2f} | {recall:.3f} | {nbytes / MB:.0f} |")
        sys.stdout.flush()


def numbers(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="the folder everything is written under")
    parser.add_argument("--ann", type=Path, help="only the last table, from this --work folder's vectors")
    parser.add_argument("--ann-python", default=sys.executable, help="the interpreter that has faiss and usearch")
    parser.add_argument("--sizes", type=numbers, default=numbers("10000,100000,300000,1000000"))
    parser.add_argument("--ann-sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    if args.ann:
        ann_tables(args.ann, numbers(args.ann_sizes))
        return
    if not args.work:
        parser.error("--work or --ann is needed")
    work = args.work.resolve()
    os.environ["FANOUT_CACHE"] = str(work / "cache")  # never the user's cache; a cold run finds none
    shutil.rmtree(work / "cache", ignore_errors=True)
    open_tables(work)
    save_vectors(work)
    size_tables(work, args.sizes)
    sys.stdout.flush()
    command = [args.ann_python, __file__, "--ann", str(work), "--ann-sizes", args.ann_sizes]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
