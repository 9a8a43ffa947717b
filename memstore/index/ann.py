"""Faster vector scans for large indexes: a float16 copy scanned by faiss, and an optional approximate (IVF) index.

Both are disposable sidecars of one matrix generation in `.memstore/`, built from the float32
matrix on first use and extended when rows are appended; both only propose candidates, which are
then scored again against the float32 rows, so every score a caller sees is the exact cosine.
faiss is optional (`pip install faiss-cpu`); without it the float32 numpy scan is used.

- float16 scan: half the bytes of the float32 matrix, scanned with faiss's SIMD kernels; the top
  `4 × want` candidates are re-scored in float32, so the result equals the exact scan unless two
  scores tie within float16 rounding (measured recall@10 1.0, docs/benchmarks.md).
- int8 scan (the default from INT8_MIN_ROWS rows): a quarter of the float32 bytes, each dimension
  scaled to the int8 range. The scan is memory-bound on a small machine, so halving the bytes
  again halves it; the re-scored candidates are approximate in principle, but the top 50 of the
  exact scan were all among the top 200 int8 candidates for 300 MiniLM queries over 105k
  passages and for the 1M-row benchmark queries.
- IVF: k-means cells over the rows; a query scans the `nprobe` nearest cells only. Approximate by
  design; it is used only where `[settings] vector_index = "ivf"`, and its recall@10 against the
  exact scan is reported by the benchmark.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

FP16_MIN_ROWS = 200_000  # below this the float32 numpy scan is as fast (matrix in cache)
INT8_MIN_ROWS = 500_000  # from here "auto" scans int8 codes: the scan is memory-bound, and int8 reads half the bytes
RESCORE = 4  # float16 or int8 candidates per wanted row, re-scored in float32
SPLIT_ROWS = 400_000  # from here a plain vector query shares its scan's chunks between two threads
CHUNK_ROWS = 65_536  # rows per faiss index: the unit of work that threads share
IVF_NPROBE = 48
_lock = threading.Lock()


def have_faiss() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def fp16_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"vectors-{gen}.f16"


def int8_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"vectors-{gen}.i8"


def ivf_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"ivf-{gen}.faiss"


def sidecars(meta_dir: Path) -> list[Path]:
    return [
        *meta_dir.glob("vectors-*.f16"),
        *meta_dir.glob("vectors-*.i8"),
        *meta_dir.glob("ivf-*.faiss"),
    ]


def _threads(n: int = 1) -> None:
    import faiss

    # One thread per query: a search runs beside the FTS query in another thread, and on a shared
    # 2-core machine an OpenMP team that waits for a busy core costs more than it saves.
    faiss.omp_set_num_threads(n)


class Fp16Scan:
    """The float16 (or int8) rows of one generation in faiss flat indexes (inner product), kept per process.

    Rows are held in chunks of CHUNK_ROWS, one faiss index each, so that a scan is a list of
    independent tasks (`tasks`): a hybrid search shares them between a worker thread and the
    thread that ran the FTS query once it is done, which keeps both cores busy for the whole scan.
    """

    qtype = "QT_fp16"
    suffix = ".f16"

    def __init__(self, meta_dir: Path, gen: int, matrix: np.ndarray):
        self.gen, self.dim = gen, matrix.shape[1]
        self.chunks: list = []  # faiss indexes of CHUNK_ROWS rows (the last one may hold fewer)
        path = self.path(meta_dir)
        codes = self._load(path, matrix)
        if codes is not None and codes.size:
            self._append_codes(codes)
        self.extend(meta_dir, matrix)

    def path(self, meta_dir: Path) -> Path:
        return meta_dir / f"vectors-{self.gen}{self.suffix}"

    # ----- the file: codes of every row, in row order ------------------------------------------

    def _load(self, path: Path, matrix: np.ndarray) -> np.ndarray | None:
        have = path.stat().st_size // self.dim // 2 if path.exists() else 0
        have = min(have, matrix.shape[0])
        return np.fromfile(path, dtype=np.uint8, count=have * 2 * self.dim) if have else None

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        """faiss's codes for these float32 rows, as bytes (row-major)."""
        return np.ascontiguousarray(rows, dtype="<f2").view(np.uint8).reshape(-1)

    def _header(self) -> bytes:
        return b""

    def _code_size(self) -> int:
        return 2 * self.dim

    def query(self, q: np.ndarray) -> np.ndarray:
        """The query as faiss is given it (1 x dim float32)."""
        return np.asarray(q, np.float32)[None]

    # ----- chunks --------------------------------------------------------------------------------

    def _new_index(self):
        import faiss

        return faiss.IndexScalarQuantizer(
            self.dim, getattr(faiss.ScalarQuantizer, self.qtype), faiss.METRIC_INNER_PRODUCT
        )

    def _append_codes(self, codes: np.ndarray) -> None:
        import faiss

        size = self._code_size()
        at = 0
        total = codes.size // size
        chunks = list(self.chunks)
        while at < total:
            # A partial last chunk is replaced, never changed in place: a search in another
            # thread may be reading it (its tasks hold the old index object).
            last = chunks[-1] if chunks and chunks[-1].ntotal < CHUNK_ROWS else None
            have = last.ntotal if last is not None else 0
            take = min(CHUNK_ROWS - have, total - at)
            part = codes[at * size : (at + take) * size]
            if last is not None:
                part = np.concatenate([faiss.vector_to_array(last.codes), part])
                chunks.pop()
            ix = self._new_index()
            faiss.copy_array_to_vector(np.ascontiguousarray(part), ix.codes)
            ix.ntotal = have + take
            chunks.append(ix)
            at += take
        self.chunks = chunks

    @property
    def rows(self) -> int:
        return sum(ix.ntotal for ix in self.chunks)

    def extend(self, meta_dir: Path, matrix: np.ndarray) -> None:
        """Encode rows appended since (the file is extended; a reader ignores a partial tail row)."""
        start = self.rows
        if matrix.shape[0] <= start:
            return
        head = self._header()
        size = self._code_size()
        with open(self.path(meta_dir), "r+b" if start else "wb") as f:
            if not start:
                f.write(head)
            f.truncate(len(head) + start * size)
            f.seek(len(head) + start * size)
            for s in range(start, matrix.shape[0], CHUNK_ROWS):
                codes = self._encode(np.asarray(matrix[s : s + CHUNK_ROWS], np.float32))
                self._append_codes(codes)
                f.write(codes.tobytes())

    # ----- search ----------------------------------------------------------------------------------

    def tasks(self, q: np.ndarray, want: int, lo: int, hi: int) -> list:
        """One callable per chunk that meets [lo, hi): each returns (approximate scores, absolute
        rows) of that chunk's best `RESCORE × want` rows in the range. Any thread may run them."""
        import faiss

        fq = self.query(q)
        k = RESCORE * want
        out = []
        base = 0
        for ix in self.chunks:
            a, b = max(lo, base), min(hi, base + ix.ntotal)
            if a < b:
                params = None
                if a > base or b < base + ix.ntotal:
                    params = faiss.SearchParameters(sel=faiss.IDSelectorRange(a - base, b - base))

                def one(ix=ix, base=base, n=min(k, b - a), params=params):
                    _threads()
                    d, ids = ix.search(fq, n, params=params)
                    keep = ids[0] >= 0
                    return d[0][keep], ids[0][keep] + base

                out.append(one)
            base += ix.ntotal
        return out

    def candidates(self, q: np.ndarray, want: int, lo: int, hi: int) -> np.ndarray:
        """Row numbers (absolute) of the best `RESCORE × want` rows in [lo, hi), unordered.

        From SPLIT_ROWS rows on, the chunks are shared by two threads (faiss releases the GIL; one
        query alone would use one core, since faiss parallelises across queries)."""
        work = Work(self.tasks(q, want, lo, hi))
        if hi - lo >= SPLIT_ROWS and len(work.tasks) > 1:
            work.run_beside(lambda: None)
        else:
            work.run()
        return best(work.results(), RESCORE * want)


class Int8Scan(Fp16Scan):
    """int8 codes (a quarter of the float32 bytes): each dimension scaled by 127 / its largest
    |value| at the first build (later rows are clipped to that range); the query is scaled back per
    dimension and rounded to int8 too, so faiss's integer kernel computes the dot product.

    Approximate candidates only: the top `RESCORE × want` are re-scored in float32. The file starts
    with the dim float32 scales."""

    qtype = "QT_8bit_direct_signed"
    suffix = ".i8"

    def _load(self, path: Path, matrix: np.ndarray) -> np.ndarray | None:
        head = 4 * self.dim
        size = path.stat().st_size if path.exists() else 0
        if size < head:
            self.scale = self._scales(matrix)
            return None
        self.scale = np.fromfile(path, dtype="<f4", count=self.dim).astype(np.float32)
        have = min((size - head) // self.dim, matrix.shape[0])
        return (
            np.fromfile(path, dtype=np.uint8, count=have * self.dim, offset=head) if have else None
        )

    def _scales(self, matrix: np.ndarray) -> np.ndarray:
        top = np.zeros(self.dim, np.float32)
        for s in range(0, matrix.shape[0], CHUNK_ROWS):
            top = np.maximum(
                top, np.abs(np.asarray(matrix[s : s + CHUNK_ROWS], np.float32)).max(axis=0)
            )
        return (127.0 / np.maximum(top, 1e-12)).astype(np.float32)

    def _header(self) -> bytes:
        return self.scale.astype("<f4").tobytes()

    def _code_size(self) -> int:
        return self.dim

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        # faiss's signed direct codes are the value + 128, one byte each.
        x = np.clip(np.rint(rows * self.scale), -128, 127)
        return (x + 128).astype(np.uint8).reshape(-1)

    def query(self, q: np.ndarray) -> np.ndarray:
        y = np.asarray(q, np.float32) / self.scale
        top = float(np.abs(y).max()) if y.size else 0.0
        if top > 0:
            y = np.rint(y * (127.0 / top))
        return y.astype(np.float32)[None]


class Work:
    """Independent tasks that any number of threads take from one list; results in task order."""

    def __init__(self, tasks: list):
        self.tasks = tasks
        self._out: list = [None] * len(tasks)
        self._next = 0
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def run(self) -> None:
        """Take tasks until none is left (call from as many threads as should share them)."""
        while True:
            with self._lock:
                i = self._next
                self._next += 1
            if i >= len(self.tasks) or self._error is not None:
                return
            try:
                self._out[i] = self.tasks[i]()
            except BaseException as e:  # re-raised by results() in the caller's thread
                self._error = e
                return

    def run_beside(self, fn):
        """Run the tasks in a worker thread while this thread runs `fn`, then help with what is
        left; returns fn's result."""
        worker = threading.Thread(target=self.run, daemon=True)
        worker.start()
        try:
            value = fn()
        finally:
            self.run()
            worker.join()
        return value

    def results(self) -> list:
        if self._error is not None:
            raise self._error
        return self._out


def best(parts: list, k: int) -> np.ndarray:
    """Rows of the `k` highest approximate scores over the (scores, rows) of several tasks."""
    parts = [p for p in parts if p is not None and p[1].size]
    if not parts:
        return np.zeros(0, np.int64)
    scores = np.concatenate([p[0] for p in parts])
    rows = np.concatenate([p[1] for p in parts])
    if rows.size <= k:
        return rows
    return rows[np.argpartition(-scores, k - 1)[:k]]


class Ivf:
    """An IVF index (float16 codes) over one generation; approximate, re-scored in float32."""

    def __init__(self, index, gen: int):
        self.index, self.gen = index, gen

    @classmethod
    def build(cls, meta_dir: Path, gen: int, matrix: np.ndarray, threads: int = 2) -> "Ivf":
        import faiss

        faiss.omp_set_num_threads(threads)
        n, dim = matrix.shape
        # ~sqrt(n) cells: k-means training and the assignment of every row cost n x nlist dot
        # products, which a 2-core machine pays at build time; more cells would cut query cost only.
        nlist = max(16, min(65536, int(np.sqrt(n))))
        quant = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quant, dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )
        rng = np.random.default_rng(0)
        sample = np.sort(rng.choice(n, size=min(n, 40 * nlist), replace=False))
        index.cp.niter = 10
        index.train(np.ascontiguousarray(matrix[sample], dtype=np.float32))
        for s in range(0, n, 100_000):
            index.add(np.ascontiguousarray(matrix[s : s + 100_000], dtype=np.float32))
        path = ivf_path(meta_dir, gen)
        tmp = path.with_suffix(".tmp")
        faiss.write_index(index, str(tmp))
        tmp.replace(path)
        return cls(index, gen)

    @classmethod
    def load(cls, meta_dir: Path, gen: int) -> "Ivf | None":
        import faiss

        path = ivf_path(meta_dir, gen)
        if not path.exists():
            return None
        return cls(faiss.read_index(str(path)), gen)

    @property
    def rows(self) -> int:
        return self.index.ntotal

    def extend(self, meta_dir: Path, matrix: np.ndarray) -> None:
        import faiss

        if matrix.shape[0] > self.rows:
            self.index.add(np.ascontiguousarray(matrix[self.rows :], dtype=np.float32))
            path = ivf_path(meta_dir, self.gen)
            tmp = path.with_suffix(".tmp")
            faiss.write_index(self.index, str(tmp))
            tmp.replace(path)

    def candidates(
        self, q: np.ndarray, want: int, lo: int, hi: int, nprobe: int = IVF_NPROBE
    ) -> np.ndarray:
        import faiss

        _threads()
        sel = faiss.IDSelectorRange(lo, hi) if (lo > 0 or hi < self.rows) else None
        params = (
            faiss.SearchParametersIVF(nprobe=nprobe, sel=sel)
            if sel is not None
            else faiss.SearchParametersIVF(nprobe=nprobe)
        )
        _, ids = self.index.search(np.asarray(q, np.float32)[None], RESCORE * want, params=params)
        ids = ids[0]
        return ids[ids >= 0]


def rescore(
    matrix: np.ndarray, q: np.ndarray, rows: np.ndarray, want: int
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, float32 cosines) of the best `want` of `rows`, best first (ties: lower row first)."""
    rows = np.sort(rows)  # ascending rows read the memory map in order
    scores = np.asarray(matrix[rows], np.float32) @ np.asarray(q, np.float32)
    order = np.lexsort((rows, -scores))[:want]
    return rows[order], scores[order]


def scanner_for(index, kind: str):
    """The per-process Fp16Scan or Ivf for the index's current generation, or None to use numpy.

    kind is "fp16", "int8" or "ivf". Built (and saved) on first use, extended when rows were appended.
    """
    if not have_faiss():
        return None
    vecs, _ = index.matrix()
    gen = int(index._meta(index.conn, "gen", "0"))
    with _lock:
        cache = index.__dict__.setdefault("_scanners", {})
        cur = cache.get(kind)
        if cur is not None and cur.gen != gen:
            cur = None
        if cur is None:
            if kind == "fp16":
                cur = Fp16Scan(index.meta_dir, gen, vecs)
            elif kind == "int8":
                cur = Int8Scan(index.meta_dir, gen, vecs)
                # A store that grew past INT8_MIN_ROWS no longer reads its float16 copy (768 MB at 1M rows).
                cache.pop("fp16", None)
                fp16_path(index.meta_dir, gen).unlink(missing_ok=True)
            else:
                cur = Ivf.load(index.meta_dir, gen)
                if cur is None or cur.rows > vecs.shape[0]:
                    cur = Ivf.build(index.meta_dir, gen, vecs)
            cache[kind] = cur
        cur.extend(index.meta_dir, vecs)
        return cur
