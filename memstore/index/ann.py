"""Faster vector scans for large indexes: a float16 copy scanned by faiss, and an optional approximate (IVF) index.

Both are disposable sidecars of one matrix generation in `.memstore/`, built from the float32
matrix on first use and extended when rows are appended; both only propose candidates, which are
then scored again against the float32 rows, so every score a caller sees is the exact cosine.
faiss is optional (`pip install faiss-cpu`); without it the float32 numpy scan is used.

- float16 scan: half the bytes of the float32 matrix, scanned with faiss's SIMD kernels; the top
  `4 × want` candidates are re-scored in float32, so the result equals the exact scan unless two
  scores tie within float16 rounding (measured recall@10 1.0, docs/benchmarks.md).
- IVF: k-means cells over the rows; a query scans the `nprobe` nearest cells only. Approximate by
  design; it is used only where `[settings] vector_index = "ivf"`, and its recall@10 against the
  exact scan is reported by the benchmark.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

FP16_MIN_ROWS = 200_000  # below this the float32 numpy scan is as fast (matrix in cache)
RESCORE = 4  # float16 candidates per wanted row, re-scored in float32
SPLIT_ROWS = 400_000  # from here a float16 scan runs as two halves in two threads
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


def ivf_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"ivf-{gen}.faiss"


def sidecars(meta_dir: Path) -> list[Path]:
    return [*meta_dir.glob("vectors-*.f16"), *meta_dir.glob("ivf-*.faiss")]


def _threads(n: int = 1) -> None:
    import faiss

    # One thread per query: a search runs beside the FTS query in another thread, and on a shared
    # 2-core machine an OpenMP team that waits for a busy core costs more than it saves.
    faiss.omp_set_num_threads(n)


class Fp16Scan:
    """The float16 rows of one generation in a faiss flat index (inner product), kept per process."""

    def __init__(self, meta_dir: Path, gen: int, matrix: np.ndarray):
        import faiss

        self.gen, self.dim = gen, matrix.shape[1]
        self.index = faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        path = fp16_path(meta_dir, gen)
        have = path.stat().st_size // (2 * self.dim) if path.exists() else 0
        have = min(have, matrix.shape[0])
        if have:
            codes = np.fromfile(path, dtype=np.uint8, count=have * 2 * self.dim)
            faiss.copy_array_to_vector(codes, self.index.codes)
            self.index.ntotal = have
        self.extend(meta_dir, matrix)

    @property
    def rows(self) -> int:
        return self.index.ntotal

    def extend(self, meta_dir: Path, matrix: np.ndarray) -> None:
        """Encode rows appended since (the file is extended; a reader ignores a partial tail row)."""
        start = self.rows
        if matrix.shape[0] <= start:
            return
        new = np.ascontiguousarray(matrix[start:], dtype=np.float32)
        self.index.add(new)
        with open(fp16_path(meta_dir, self.gen), "r+b" if start else "wb") as f:
            f.truncate(start * 2 * self.dim)
            f.seek(start * 2 * self.dim)
            f.write(new.astype("<f2").tobytes())

    def candidates(self, q: np.ndarray, want: int, lo: int, hi: int) -> np.ndarray:
        """Row numbers (absolute) of the best `RESCORE × want` rows in [lo, hi), unordered.

        From SPLIT_ROWS rows on, the range is scanned as two halves in two threads (faiss releases
        the GIL; one query alone would use one core, since faiss parallelises across queries)."""
        _threads()
        q = np.asarray(q, np.float32)[None]
        if hi - lo < SPLIT_ROWS:
            return self._range(q, want, lo, hi)
        mid = (lo + hi) // 2
        part: list[np.ndarray] = []
        worker = threading.Thread(target=lambda: part.append(self._range(q, want, mid, hi)), daemon=True)
        worker.start()
        first = self._range(q, want, lo, mid)
        worker.join()
        return np.concatenate([first, *part])

    def _range(self, q: np.ndarray, want: int, lo: int, hi: int) -> np.ndarray:
        import faiss

        n = min(RESCORE * want, hi - lo)
        params = None
        if lo > 0 or hi < self.rows:
            params = faiss.SearchParameters(sel=faiss.IDSelectorRange(lo, hi))
        _, ids = self.index.search(q, n, params=params)
        ids = ids[0]
        return ids[ids >= 0]


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

    def candidates(self, q: np.ndarray, want: int, lo: int, hi: int, nprobe: int = IVF_NPROBE) -> np.ndarray:
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


def rescore(matrix: np.ndarray, q: np.ndarray, rows: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, float32 cosines) of the best `want` of `rows`, best first (ties: lower row first)."""
    rows = np.sort(rows)  # ascending rows read the memory map in order
    scores = np.asarray(matrix[rows], np.float32) @ np.asarray(q, np.float32)
    order = np.lexsort((rows, -scores))[:want]
    return rows[order], scores[order]


def scanner_for(index, kind: str):
    """The per-process Fp16Scan or Ivf for the index's current generation, or None to use numpy.

    kind is "fp16" or "ivf". Built (and saved) on first use, extended when rows were appended.
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
            else:
                cur = Ivf.load(index.meta_dir, gen)
                if cur is None or cur.rows > vecs.shape[0]:
                    cur = Ivf.build(index.meta_dir, gen, vecs)
            cache[kind] = cur
        cur.extend(index.meta_dir, vecs)
        return cur
