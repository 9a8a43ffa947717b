"""Builds the ONNX graph of all-MiniLM-L6-v2 (BERT encoder, mean pooling, L2 norm) from the bundled safetensors.

The graph is written with the `onnx` helper API straight from the weights the project installs, so
neither torch nor a download is needed; it is built once (by `make install`, else on first use)
and cached per user, never committed into a store. Run `python -m memstore.adapters.minilm`
to build it ahead of time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

GRAPH_VERSION = (
    2  # bump when the graph changes, so cached files are rebuilt (2: the content_mask input)
)
_HEADS = 12
_EPS = 1e-12  # layer_norm_eps in config.json
_OPSET = 18


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memstore" / "models"


def graph_path(weights: Path, quant: str = "fp32") -> Path:
    """Where the graph for these weights is cached: keyed by the graph's version and the weights' content.

    Hashing 90 MB would cost a cold `ct search` ~0.1 s, so the content is fingerprinted by the file's
    size, its safetensors header (every tensor's name, shape and offset) and FINGERPRINT_BLOCKS
    blocks spread over the data (~1 ms). A fine-tune changes every block; a reinstall or a second
    clone of the same weights finds the graph already built (a key by path and mtime left a new
    180 MB copy behind each time).
    """
    return cache_dir() / f"minilm-g{GRAPH_VERSION}-{weights_fingerprint(weights)}-{quant}.onnx"


FINGERPRINT_BLOCKS = 16
_BLOCK = 64 * 1024


def weights_fingerprint(weights: Path) -> str:
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        digest.update(str(size).encode())
        head = f.read(8)
        digest.update(head)
        if len(head) == 8:
            digest.update(f.read(min(int.from_bytes(head, "little"), size)))
        for i in range(FINGERPRINT_BLOCKS):
            f.seek(size * i // FINGERPRINT_BLOCKS)
            digest.update(f.read(_BLOCK))
        f.seek(max(0, size - _BLOCK))
        digest.update(f.read(_BLOCK))
    return digest.hexdigest()[:16]


def _remove_stale(folder: Path, keep: Path) -> None:
    """Graphs cached by other graph versions (or by the old path-and-mtime key) are never loaded again."""
    current = f"minilm-g{GRAPH_VERSION}-"
    for old in folder.glob("minilm-*"):
        if not old.name.startswith(current) and old.suffix in (".onnx", ".data") and old != keep:
            old.unlink(missing_ok=True)  # a process still using one keeps its memory map


def ensure_graph(folder: Path, quant: str = "fp32") -> Path:
    """The cached graph for the model in `folder`, built (atomically) if it is not there yet."""
    weights = folder / "model.safetensors"
    path = graph_path(weights, quant)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path.parent, path)
    if quant == "fp32":
        _save_external(build_model(read_safetensors(weights)), path)
    elif quant == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        src = ensure_graph(folder, "fp32")
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
        os.close(fd)
        try:
            quantize_dynamic(str(src), tmp, weight_type=QuantType.QInt8)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
    else:
        raise ValueError(f"unknown quantisation {quant!r} (fp32 or int8)")
    return path


def _save_external(model, path: Path) -> None:
    """The graph in `path`, its weights beside it in `<name>.data`, which onnxruntime memory-maps.

    A session over external weights starts in about half the time of one that parses 90 MB of
    protobuf (measured ~0.13 s against ~0.3 s). The data file is moved into place first, so a
    graph file that exists is always complete.
    """
    import onnx

    data_name = path.with_suffix(".data").name
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        onnx.save_model(
            model,
            str(Path(tmp) / path.name),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=data_name,
            size_threshold=1024,
        )
        os.replace(Path(tmp) / data_name, path.parent / data_name)
        os.replace(Path(tmp) / path.name, path)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """float32 tensors by name (the 8-byte header size, a JSON header, then raw little-endian data)."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        body = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue  # position_ids (I64) is not needed
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype="<f4").reshape(info["shape"])
    return out


class _Graph:
    """Accumulates nodes and initializers; names are generated so the builder reads like the math."""

    def __init__(self):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, name: str, arr) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out


def build_model(t: dict[str, np.ndarray]):
    """The ONNX ModelProto: input_ids, attention_mask and content_mask (int64, batch × length) -> unit vectors
    (batch × 384): `embedding`, the mean over all real tokens, and `content`, the mean of the same token
    vectors over the tokens content_mask marks (a row without any gives zeros).
    """
    from onnx import TensorProto, helper

    g = _Graph()
    hidden = t["embeddings.word_embeddings.weight"].shape[1]
    head = hidden // _HEADS
    ids, mask, cmask = "input_ids", "attention_mask", "content_mask"

    # Embeddings: word + position (rows 0..L-1) + token type 0, then LayerNorm.
    word = g.op("Gather", g.const("word", t["embeddings.word_embeddings.weight"]), ids)
    length = g.op(
        "Slice",
        g.op("Shape", ids),
        g.const("one", np.array([1], np.int64)),
        g.const("two", np.array([2], np.int64)),
    )
    pos = g.op(
        "Slice",
        g.const("pos", t["embeddings.position_embeddings.weight"]),
        g.const("zero", np.array([0], np.int64)),
        length,
        g.const("axis0", np.array([0], np.int64)),
    )
    x = g.op(
        "Add",
        g.op("Add", word, pos),
        g.const("type0", t["embeddings.token_type_embeddings.weight"][0]),
    )
    x = g.op(
        "LayerNormalization",
        x,
        g.const("ln_g", t["embeddings.LayerNorm.weight"]),
        g.const("ln_b", t["embeddings.LayerNorm.bias"]),
        axis=-1,
        epsilon=_EPS,
    )

    # Padded keys get the most negative float32, so softmax gives them exactly 0 (as transformers does).
    maskf = g.op("Cast", mask, to=TensorProto.FLOAT)
    keep = g.op("Unsqueeze", maskf, g.const("axes12", np.array([1, 2], np.int64)))  # (B, 1, 1, L)
    bias = g.op(
        "Mul",
        g.op("Sub", g.const("f1", np.float32(1.0)), keep),
        g.const("fmin", np.finfo(np.float32).min),
    )
    heads_shape = g.const("heads_shape", np.array([0, 0, _HEADS, head], np.int64))
    flat_shape = g.const("flat_shape", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.float32(head**-0.5))

    n_layers = sum(k.endswith(".attention.self.query.weight") for k in t)
    for i in range(n_layers):
        p = f"encoder.layer.{i}."

        def dense(inp, name, p=p, i=i):
            w = g.const(f"l{i}_{name}_w", t[p + name + ".weight"].T)  # stored (out, in)
            return g.op(
                "Add", g.op("MatMul", inp, w), g.const(f"l{i}_{name}_b", t[p + name + ".bias"])
            )

        def split_heads(inp, perm):
            return g.op("Transpose", g.op("Reshape", inp, heads_shape), perm=perm)

        q = split_heads(dense(x, "attention.self.query"), [0, 2, 1, 3])  # (B, H, L, d)
        k = split_heads(dense(x, "attention.self.key"), [0, 2, 3, 1])  # (B, H, d, L)
        v = split_heads(dense(x, "attention.self.value"), [0, 2, 1, 3])  # (B, H, L, d)
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), flat_shape)
        a = g.op("Add", dense(ctx, "attention.output.dense"), x)
        a = g.op(
            "LayerNormalization",
            a,
            g.const(f"l{i}_ln1_g", t[p + "attention.output.LayerNorm.weight"]),
            g.const(f"l{i}_ln1_b", t[p + "attention.output.LayerNorm.bias"]),
            axis=-1,
            epsilon=_EPS,
        )
        inner = dense(a, "intermediate.dense")
        # Exact GELU, x * (1 + erf(x / sqrt 2)) / 2, written so onnxruntime fuses it into one kernel.
        erf = g.op("Erf", g.op("Div", inner, g.const(f"l{i}_sqrt2", np.float32(np.sqrt(2.0)))))
        gelu = g.op(
            "Mul",
            g.op("Mul", inner, g.op("Add", erf, g.const(f"l{i}_one", np.float32(1.0)))),
            g.const(f"l{i}_half", np.float32(0.5)),
        )
        y = g.op("Add", dense(gelu, "output.dense"), a)
        x = g.op(
            "LayerNormalization",
            y,
            g.const(f"l{i}_ln2_g", t[p + "output.LayerNorm.weight"]),
            g.const(f"l{i}_ln2_b", t[p + "output.LayerNorm.bias"]),
            axis=-1,
            epsilon=_EPS,
        )

    # Mean over real tokens, then unit length (sentence-transformers' Pooling + Normalize, eps 1e-12).
    m3 = g.op("Unsqueeze", maskf, g.const("axis2", np.array([2], np.int64)))  # (B, L, 1)
    summed = g.op(
        "ReduceSum", g.op("Mul", x, m3), g.const("axis1", np.array([1], np.int64)), keepdims=0
    )
    count = g.op("ReduceSum", maskf, g.const("axis1b", np.array([1], np.int64)), keepdims=1)
    mean = g.op("Div", summed, g.op("Max", count, g.const("tiny_count", np.float32(1e-9))))
    norm = g.op("ReduceL2", mean, g.const("axis1c", np.array([1], np.int64)), keepdims=1)
    out = g.op("Div", mean, g.op("Max", norm, g.const("tiny_norm", np.float32(1e-12))))
    g.nodes.append(helper.make_node("Identity", [out], ["embedding"]))
    # The same pooling over the content words' tokens only (topic placement's continue-or-branch vector).
    cmaskf = g.op("Cast", cmask, to=TensorProto.FLOAT)
    c3 = g.op("Unsqueeze", cmaskf, g.const("axis2c", np.array([2], np.int64)))
    csum = g.op(
        "ReduceSum", g.op("Mul", x, c3), g.const("axis1d", np.array([1], np.int64)), keepdims=0
    )
    ccount = g.op("ReduceSum", cmaskf, g.const("axis1e", np.array([1], np.int64)), keepdims=1)
    cmean = g.op("Div", csum, g.op("Max", ccount, g.const("one_count", np.float32(1.0))))
    cnorm = g.op("ReduceL2", cmean, g.const("axis1f", np.array([1], np.int64)), keepdims=1)
    cout = g.op("Div", cmean, g.op("Max", cnorm, g.const("tiny_norm_c", np.float32(1e-12))))
    g.nodes.append(helper.make_node("Identity", [cout], ["content"]))

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info(cmask, TensorProto.INT64, ["batch", "length"]),
        ],
        [
            helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden]),
            helper.make_tensor_value_info("content", TensorProto.FLOAT, ["batch", hidden]),
        ],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="memstore"
    )
    model.ir_version = 8  # readable by every onnxruntime since 1.10
    return model
