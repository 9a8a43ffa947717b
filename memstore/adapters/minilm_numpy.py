"""The MiniLM encoder as a hand-written numpy forward pass: the fallback where onnxruntime is not installed.

It computes the same vectors as sentence-transformers (within 1e-6) with nothing but numpy; the
ONNX graph run by onnxruntime is faster at every batch size (docs/benchmarks.md), so this path
runs only when onnxruntime cannot be imported, or when asked for (`runtime="numpy"`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def load(folder: Path) -> "_Bert":
    return _Bert(_map_safetensors(folder / "model.safetensors"))


def _map_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read-only float32 views straight onto the file (memory-mapped).

    Versus safetensors.numpy.load_file this skips copying 90 MB per process: a query touches only
    its own rows of the 47 MB word-embedding table, and the pages are shared between processes.
    The format is an 8-byte little-endian header size, a JSON header, then raw tensors.
    """
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue  # position_ids (I64) is not needed: positions are 0..n-1
        begin, end = info["data_offsets"]
        tensors[name] = raw[base + begin : base + end].view("<f4").reshape(info["shape"])
    return tensors


# --- the network: BERT encoder (6 layers, 12 heads, hidden 384, FFN 1536), float32 throughout ---

_HEADS = 12
_EPS = np.float32(1e-12)  # layer_norm_eps in config.json
_MIN = np.finfo(np.float32).min


class _Bert:
    """The encoder's weights plus a forward pass over rows of token ids, ending in mean pooling."""

    def __init__(self, t: dict):
        self.word = t["embeddings.word_embeddings.weight"]
        self.pos = t["embeddings.position_embeddings.weight"]
        self.type0 = t["embeddings.token_type_embeddings.weight"][0]  # one segment: type id 0
        self.ln = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        self.layers = []
        n_layers = sum(k.endswith(".attention.self.query.weight") for k in t)
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            # Q, K and V in one matmul. Weights are stored (out, in): `.T` gives x @ W.T, no copy.
            wqkv = np.concatenate([t[a + f"self.{n}.weight"] for n in ("query", "key", "value")])
            bqkv = np.concatenate([t[a + f"self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    wqkv.T, bqkv,
                    t[a + "output.dense.weight"].T, t[a + "output.dense.bias"],
                    t[a + "output.LayerNorm.weight"], t[a + "output.LayerNorm.bias"],
                    t[p + "intermediate.dense.weight"].T, t[p + "intermediate.dense.bias"],
                    t[p + "output.dense.weight"].T, t[p + "output.dense.bias"],
                    t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"],
                )
            )  # fmt: skip

    def embed(self, seqs: list[list[int]], content: list[list[int]] | None = None):
        """Unit sentence vectors for rows of token ids ([CLS] ... [SEP], at most 256 each).

        With `content` (one 0/1 mask per row, the tokens of its content words), also the mean of
        the same final token vectors over the masked tokens, at unit length (zero for an empty
        mask): `(vectors, content_vectors)`, from the one forward pass.
        """
        lengths = np.array([len(s) for s in seqs])
        rows, width = len(seqs), int(lengths.max())
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        pos = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
        # Dense layers run on the real tokens packed together, so padding costs them nothing; only
        # attention needs the (rows, width) grid, reached through `slot`.
        slot = np.repeat(np.arange(rows) * width, lengths) + pos
        bias = None
        if (lengths < width).any():
            padded = np.arange(width)[None, :] >= lengths[:, None]
            bias = np.where(padded, _MIN, np.float32(0))[:, None, None, :]

        x = self.word[np.concatenate(seqs)] + self.pos[pos] + self.type0
        _layer_norm(x, *self.ln)
        for layer in self.layers:
            x = _encoder_layer(x, layer, slot, bias, rows, width)
        # Mean over each row's real tokens, then unit length: sentence-transformers' Pooling + Normalize.
        vec = _unit(np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32))
        if content is None:
            return vec
        keep = np.concatenate(content).astype(np.float32)
        picked = np.add.reduceat(x * keep[:, None], starts, axis=0)
        return vec, _unit(
            picked / np.maximum(np.add.reduceat(keep, starts), np.float32(1))[:, None]
        )


def _unit(vec):
    norm = np.sqrt(np.einsum("ij,ij->i", vec, vec))[:, None]
    return vec / np.maximum(norm, np.float32(1e-12))


def _encoder_layer(x, w, slot, bias, rows, width):
    wqkv, bqkv, wo, bo, g1, b1, wi, bi, wf, bf, g2, b2 = w
    hidden = x.shape[1]
    head = hidden // _HEADS
    qkv = x @ wqkv
    qkv += bqkv
    grid = qkv  # without padding, the packed tokens already are the (rows, width) grid
    if bias is not None:
        grid = np.zeros((rows * width, 3 * hidden), dtype=np.float32)
        grid[slot] = qkv
    q, k, v = grid.reshape(rows, width, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
    scores = (q * np.float32(head**-0.5)) @ k.swapaxes(-1, -2)  # (rows, heads, width, width)
    if bias is not None:
        scores += bias  # padded keys get the most negative float, so exp() gives exactly 0
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    # Softmax's division moves after the product with V: width/head times fewer divisions.
    ctx = scores @ v
    ctx /= scores.sum(axis=-1, keepdims=True)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(rows * width, hidden)
    if bias is not None:
        ctx = ctx[slot]
    out = ctx @ wo
    out += bo
    out += x
    _layer_norm(out, g1, b1)
    inner = out @ wi
    inner += bi
    _gelu(inner)
    y = inner @ wf
    y += bf
    y += out
    _layer_norm(y, g2, b2)
    return y


def _layer_norm(x, gain, shift):
    """In place over the last axis, with the biased variance, as torch.nn.LayerNorm."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
    x *= 1.0 / np.sqrt(var + _EPS)
    x *= gain
    x += shift


# erf(z) ~= z * P(z^2) / Q(z^2) for |z| <= 3.92; beyond, erf is +-1 in float32. Coefficients fitted
# for this module (weighted least squares with Lawson reweighting toward minimax): max error 2e-8 in
# float64, 5e-7 evaluated in float32, close to torch's own float32 erf. numpy has no erf and scipy
# is not a dependency; np.vectorize(math.erf) measured ~190 ns per value, this ~5 ns.
_ERF_P = [np.float32(c) for c in (1.1283790224261498, 0.1927608243223385, 0.05306008077466727,
                                  0.0038681965955869963, 0.0002874777770174898, 2.0347770022244305e-06)]  # fmt: skip
_ERF_Q = [np.float32(c) for c in (1.0, 0.5041614999218035, 0.1150833069593181,
                                  0.015172032647717501, 0.0011880859243195993, 3.807099249562157e-05)]  # fmt: skip
_ERF_CLAMP = np.float32(3.92)
_BLOCK = 16384  # values per step, so the three temporaries stay in L2 cache


def _gelu(h):
    """Exact (erf) GELU in place, BERT's "gelu": x * (1 + erf(x / sqrt 2)) / 2."""
    flat = h.reshape(-1)
    bufs = [np.empty(min(_BLOCK, flat.size), dtype=np.float32) for _ in range(3)]
    for s in range(0, flat.size, _BLOCK):
        x = flat[s : s + _BLOCK]
        z, t, p = (b[: x.size] for b in bufs)
        np.multiply(x, np.float32(0.5**0.5), out=z)
        np.minimum(z, _ERF_CLAMP, out=z)
        np.maximum(z, -_ERF_CLAMP, out=z)
        np.multiply(z, z, out=t)
        np.multiply(t, _ERF_P[-1], out=p)
        for c in _ERF_P[-2:0:-1]:
            p += c
            p *= t
        p += _ERF_P[0]
        p *= z
        q = z  # z is used up: its buffer takes Q
        np.multiply(t, _ERF_Q[-1], out=q)
        for c in _ERF_Q[-2:0:-1]:
            q += c
            q *= t
        q += _ERF_Q[0]
        p /= q
        p += 1
        p *= 0.5
        x *= p
