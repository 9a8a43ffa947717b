"""Faster vector scans for large indexes: faiss copies of the int8 matrix, and an optional approximate (IVF) index.

All are disposable sidecars of one matrix generation in `.memstore/`, built from the matrix
(index/vectors.py: int8 codes, decoded as x_hat = codes / scales) on first use and extended when
rows are appended; all only propose candidates, which the search re-scores exactly from the packs
(memstore/retrieve/search.py, index/exact.py), so every score a caller sees is the exact cosine.
faiss is optional (`pip install faiss-cpu`); without it the numpy scan of the codes is used.

- float16 scan: x_hat in float16, scanned with faiss's SIMD kernels. `bound` says how far above
  a left-out row's faiss score its int8 score may lie (float16 rounds by 2^-11 of a value), so
  the search can prove that no left-out row belongs in the top k, or asks for more.
- int8 scan (the default from INT8_MIN_ROWS rows): the matrix's own codes and scales (the scan is
  memory-bound on a small machine, so a quarter of the float32 bytes is a quarter of the time);
  the query is rounded to integers for faiss's kernel, and `bound` counts that rounding.
- IVF: k-means cells over the rows, holding their int8 codes; a query scans the `nprobe` nearest
  cells only. Approximate by design (no bound on what the cells leave out); it is used only where
  `[settings] vector_index = "ivf"`, and its recall@10 against the exact scan is reported by the
  benchmark (docs/ann-vs-hnsw.md). Its candidates are settled by `settle`: the exact top k among
  them, reading only the vectors that their int8 bounds do not rule out.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import numpy as np

from ..locking import file_lock, lock_timeout
from .. import storefile

FP16_MIN_ROWS = 200_000  # below this the numpy scan of the codes is as fast (matrix in cache)
INT8_MIN_ROWS = 500_000  # from here "auto" scans int8 codes: the scan is memory-bound, and int8 reads half the bytes
RESCORE = 4  # float16 or int8 candidates per wanted row, re-scored exactly
SPLIT_ROWS = 400_000  # from here a plain vector query shares its scan's chunks between two threads
CHUNK_ROWS = 65_536  # rows per faiss index: the unit of work that threads share
IVF_NPROBE = 96  # cells a query scans (docs/ann-vs-hnsw.md: recall@10 >= 0.99 at 100k and 1M)
SCAN_LOCK = "scan.lock"  # held while a process builds or extends a scan copy's files
IVF_MIN_ROWS = 50_000  # an IVF index asked for (vector_index = "ivf") is used from here on
_lock = threading.Lock()


def have_faiss() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def fp16_path(meta_dir: Path, gen: int) -> Path:
    """The float16 scan copy's tail file (its full chunks are `vectors-<gen>.f16.<k>`)."""
    return meta_dir / f"vectors-{gen}.f16.tail"


def int8_path(meta_dir: Path, gen: int) -> Path:
    """The int8 scan copy's tail file (its full chunks are `vectors-<gen>.q8.<k>`)."""
    return meta_dir / f"vectors-{gen}.q8.tail"


def ivf_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"ivf-{gen}.q8.faiss"


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

    On disk, each full chunk is a faiss index file (`vectors-<gen>.f16.<k>`), written once and
    memory-mapped when read, so a new process starts scanning at once and the codes stay in the
    page cache, shared, instead of being copied into each process's own memory (384 MB of int8
    codes at 1M rows). The rows past the last full chunk are appended to a tail file
    (`vectors-<gen>.f16.tail`: a header naming its first row, then the codes) and held in memory.
    Everything here is disposable: a file that is not exactly what this code writes is rebuilt
    from the matrix, never handed to faiss as it is.
    """

    qtype = "QT_fp16"
    suffix = ".f16"

    def __init__(self, meta_dir: Path, gen: int, matrix: np.ndarray):
        self.meta_dir, self.gen, self.dim = meta_dir, gen, matrix.shape[1]
        self.chunks: list = []  # faiss indexes of CHUNK_ROWS rows (the last one may hold fewer)
        self.full = 0  # rows in full chunks read from (or written to) their own files
        self._open(matrix)
        self.extend(meta_dir, matrix)

    def path(self, meta_dir: Path) -> Path:
        """The tail file."""
        return meta_dir / f"vectors-{self.gen}{self.suffix}.tail"

    def chunk_path(self, k: int) -> Path:
        return self.meta_dir / f"vectors-{self.gen}{self.suffix}.{k}"

    # ----- the codes ---------------------------------------------------------------------------

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        """faiss's codes for these float32 rows, as bytes (row-major)."""
        return np.ascontiguousarray(rows, dtype="<f2").view(np.uint8).reshape(-1)

    def _code_size(self) -> int:
        return 2 * self.dim

    def _settings(self) -> bytes:
        """What the tail file's header holds besides its first row and width (the int8 scales)."""
        return b""

    def _settings_len(self) -> int:
        return 0

    def _take_settings(self, raw: bytes | None, matrix: np.ndarray) -> None:
        """Adopt the settings read from an existing tail file (raise ValueError when they are not
        sound), or with raw None make new ones for this matrix."""

    def query(self, q: np.ndarray) -> np.ndarray:
        """The query as faiss is given it (1 x dim float32)."""
        return np.asarray(q, np.float32)[None]

    def bound(self, matrix, q: np.ndarray, score: float) -> float:
        """A bound on codes . (q / scales) of a row (matrix: vectors.Matrix) whose faiss score
        is at most `score`. float16 rounds each decoded value x_i by at most 2^-11 |x_i|, and
        |x_i| <= 127 / scale_i, so faiss's score is off by at most 2^-11 * ||x_max|| * ||q||;
        twice that, and float32 rounding, besides."""
        xmax = 127.0 * float(np.linalg.norm(matrix.inv.astype(np.float64)))
        qn = float(np.linalg.norm(np.asarray(q, np.float64)))
        return score + (2.0**-10 + 4 * (self.dim + 4) * 2.0**-24) * xmax * qn

    # ----- files -------------------------------------------------------------------------------

    def _tail_head(self, start: int) -> bytes:
        return TAIL_MAGIC + struct.pack("<qq", start, self.dim) + self._settings()

    def _open(self, matrix: np.ndarray) -> None:
        """Map the full chunks and read the tail; anything inconsistent starts the copy over."""
        # What memstore wrote before chunk files: one file of every row's codes, read into memory.
        (self.meta_dir / f"vectors-{self.gen}{self.suffix}").unlink(missing_ok=True)
        path = self.path(self.meta_dir)
        settings_len = self._settings_len()
        head_len = len(TAIL_MAGIC) + 16 + settings_len
        try:
            with open(path, "rb") as f:
                head = f.read(head_len)
                start, dim = struct.unpack_from("<qq", head, len(TAIL_MAGIC))
                if not head.startswith(TAIL_MAGIC) or len(head) < head_len or dim != self.dim:
                    raise ValueError("not a tail file")
                if start < 0 or start % CHUNK_ROWS or start > matrix.shape[0]:
                    raise ValueError("tail starts at a row no chunk ends at")
                self._take_settings(head[head_len - settings_len :], matrix)
                chunks = [self._map_chunk(k) for k in range(start // CHUNK_ROWS)]
                if any(ix is None for ix in chunks):
                    raise ValueError("a chunk file is missing or not ours")
                size = self._code_size()
                have = min(
                    (os.fstat(f.fileno()).st_size - head_len) // size, matrix.shape[0] - start
                )
                codes = np.frombuffer(f.read(have * size), np.uint8) if have > 0 else None
        except (OSError, ValueError, struct.error):
            self._start_over(matrix)
            return
        self.chunks, self.full = chunks, start
        if codes is not None and codes.size:
            self._append_codes(codes)

    def _start_over(self, matrix: np.ndarray) -> None:
        remove_chunks(self.meta_dir, self.gen, self.suffix)
        self.chunks, self.full = [], 0
        self._take_settings(None, matrix)

    def _map_chunk(self, k: int):
        """Chunk k's faiss index, memory-mapped, or None when its file is not exactly ours."""
        import faiss

        path = self.chunk_path(k)
        size = self._code_size()
        head = faiss_header(self.qtype, self.dim, size, CHUNK_ROWS)
        if head is None:
            return None
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size != len(head) + CHUNK_ROWS * size:
                    return None
                if f.read(len(head)) != head:
                    return None
        except OSError:
            return None
        flag = getattr(faiss, "IO_FLAG_MMAP_IFC", None)  # faiss >= 1.10; before it, read in full
        ix = faiss.read_index(str(path), flag) if flag is not None else faiss.read_index(str(path))
        return ix if ix.ntotal == CHUNK_ROWS and ix.d == self.dim else None

    def _seal_last(self) -> None:
        """The last chunk just filled up: write its file, map it, start an empty tail after it."""
        import faiss

        k = self.full // CHUNK_ROWS
        head = faiss_header(self.qtype, self.dim, self._code_size(), CHUNK_ROWS)
        if head is None:
            return  # no chunk files: the tail file keeps every row
        codes = faiss.vector_to_array(self.chunks[-1].codes)
        _write_atomic(self.chunk_path(k), head, codes)
        mapped = self._map_chunk(k)
        if mapped is not None:
            self.chunks[-1] = mapped
        self.full += CHUNK_ROWS
        _write_atomic(self.path(self.meta_dir), self._tail_head(self.full), None)

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
        """Encode rows appended since: into the tail file, and into chunk files as chunks fill up
        (a reader ignores a partial tail row)."""
        at, n = self.rows, matrix.shape[0]
        size = self._code_size()
        path = self.path(meta_dir)
        while at < n:
            end = min(n, (at // CHUNK_ROWS + 1) * CHUNK_ROWS)
            codes = self._encode(np.asarray(matrix[at:end], np.float32))
            self._append_codes(codes)
            head = self._tail_head(self.full)
            if at == self.full:
                _write_atomic(path, head, codes)
            else:
                with storefile.open_file(path, "r+b", root=self.meta_dir.parent) as f:
                    f.truncate(len(head) + (at - self.full) * size)
                    f.seek(0, os.SEEK_END)
                    f.write(codes.tobytes())
            at = end
            if at % CHUNK_ROWS == 0:
                self._seal_last()

    # ----- search ----------------------------------------------------------------------------------

    def tasks(self, q: np.ndarray, want: int, lo: int, hi: int) -> list:
        """One callable per chunk that meets [lo, hi): each returns (approximate scores, absolute
        rows, whether rows were left out) of that chunk's best `RESCORE × want` rows in the range.
        Any thread may run them."""
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

                def one(ix=ix, base=base, n=min(k, b - a), params=params, cut=k < b - a):
                    _threads()
                    d, ids = ix.search(fq, n, params=params)
                    keep = ids[0] >= 0
                    # cut: rows of the range were left out, none scoring above the last one here
                    return d[0][keep], ids[0][keep] + base, cut

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
    """The matrix's int8 codes under its scales (index/vectors.py); the query is scaled back per
    dimension and rounded to integers, so faiss's integer kernel computes the dot product.

    Candidates only: the top `RESCORE × want` are re-scored exactly. The tail file's header holds
    the dim float32 scales, which must be the matrix's."""

    qtype = "QT_8bit_direct_signed"
    suffix = ".q8"  # not ".i8": vectors-<gen>.i8 is the matrix itself (index/vectors.py)

    def _settings(self) -> bytes:
        return self.scale.astype("<f4").tobytes()

    def _settings_len(self) -> int:
        return 4 * self.dim

    def _take_settings(self, raw: bytes | None, matrix) -> None:
        if raw is None:
            self.scale = np.asarray(matrix.scale, np.float32)
            return
        scale = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if scale.shape != (self.dim,) or not np.array_equal(scale, matrix.scale):
            raise ValueError("int8 scales are not the matrix's")
        self.scale = scale

    def _code_size(self) -> int:
        return self.dim

    def _encode(self, rows: np.ndarray) -> np.ndarray:
        # faiss's signed direct codes are the value + 128, one byte each; rows decoded from the
        # matrix give its codes back exactly.
        x = np.clip(np.rint(rows * self.scale), -128, 127)
        return (x + 128).astype(np.uint8).reshape(-1)

    def _rounding(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """(the query rounded to integers as faiss gets it, the factor back to code space)."""
        y = np.asarray(q, np.float32) / self.scale
        top = float(np.abs(y).max()) if y.size else 0.0
        if top <= 0:
            return y.astype(np.float32), 1.0
        return np.rint(y * (127.0 / top)).astype(np.float32), top / 127.0

    def query(self, q: np.ndarray) -> np.ndarray:
        return self._rounding(q)[0][None]

    def bound(self, matrix, q: np.ndarray, score: float) -> float:
        """A bound on codes . (q / scales) of a row whose faiss score is at most `score`: faiss
        adds integer products exactly (|sum| < 2^24), so only the query's rounding counts:
        |c . y - f c . y~| <= ||c|| ||y - f y~||, ||c|| at most the matrix's largest code norm
        (127 sqrt(dim) at worst: on the 100k bench store that bound left out too much in 26 of
        30 queries, the largest norm, 353, in none)."""
        yq, f = self._rounding(q)
        y = np.asarray(q, np.float64) / self.scale.astype(np.float64)
        off = float(np.linalg.norm(y - f * yq.astype(np.float64)))
        # Past 1,040 dimensions a sum of products up to 127 x 127 may pass 2^24: float32 rounds it.
        sums = 0.0 if self.dim <= 1040 else 4 * (self.dim + 4) * 2.0**-24 * 127.0**2 * self.dim
        cmax = min(matrix.code_norm_max(), 127.0 * np.sqrt(self.dim))
        return f * (score + sums) + cmax * off * (1 + 1e-6)


TAIL_MAGIC = b"msvq\x01\n\x00\x00"  # a scan copy's tail file (8 bytes, then first row and width)
_HEADERS: dict = {}


def faiss_header(qtype: str, dim: int, code_size: int, rows: int) -> bytes | None:
    """The bytes faiss writes before the codes of an IndexScalarQuantizer of `rows` rows.

    Learnt from faiss itself (indexes of one, two and three rows: the header differs in two
    little-endian 64-bit counts, the rows and the codes' length), so a chunk file can be written
    and checked without faiss parsing a file it did not just write."""
    key = (qtype, dim, code_size)
    if key not in _HEADERS:
        import faiss

        heads = []
        for n in (1, 2, 3):
            ix = faiss.IndexScalarQuantizer(
                dim, getattr(faiss.ScalarQuantizer, qtype), faiss.METRIC_INNER_PRODUCT
            )
            faiss.copy_array_to_vector(np.zeros(n * code_size, np.uint8), ix.codes)
            ix.ntotal = n
            raw = faiss.serialize_index(ix).tobytes()
            heads.append(raw[: len(raw) - n * code_size])
        base = heads[0]
        fields = []
        for at in range(len(base) - 7):
            one = struct.unpack_from("<q", base, at)[0]
            two = struct.unpack_from("<q", heads[1], at)[0]
            if (one, two) in ((1, 2), (code_size, 2 * code_size)):
                fields.append((at, one))
        _HEADERS[key] = (base, fields, heads[2])
    base, fields, three = _HEADERS[key]

    def make(n: int) -> bytes:
        out = bytearray(base)
        for at, unit in fields:
            struct.pack_into("<q", out, at, n * unit)
        return bytes(out)

    if len(fields) != 2 or make(3) != three:
        return None  # a faiss that writes other headers: the scan copy stays in memory
    return make(rows)


def _write_atomic(path: Path, head: bytes, codes: np.ndarray | None) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(head)
        if codes is not None:
            f.write(np.ascontiguousarray(codes).tobytes())
    tmp.replace(path)


def remove_chunks(meta_dir: Path, gen: int, suffix: str) -> None:
    """Every file of one scan copy: its chunks, its tail, and what an older memstore kept."""
    for p in meta_dir.glob(f"vectors-{gen}{suffix}*"):
        p.unlink(missing_ok=True)


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


def ivf_cells(n: int) -> int:
    """k-means cells for an IVF index of n rows: 4 x sqrt(n), faiss's own lower guide. Finer cells
    cut the rows a query scans for the same recall (at 100k on the benchmark's vectors, recall@10
    0.99 took 1.19 ms with sqrt(n) cells and 0.48 ms with 4 x sqrt(n)); the price is paid once,
    at build (k-means over 40 rows a cell: 4.7 s at 100k, 54 s at 1M on 2 cores)."""
    return max(16, min(65536, int(4 * np.sqrt(n))))


def as_matrix(matrix):
    """The int8 matrix (index/vectors.py `Matrix`) itself, or one quantized from float32 rows (a
    benchmark's vectors), with the index's own scales and codes."""
    if hasattr(matrix, "codes"):
        return matrix
    from . import vectors as vecfiles

    rows = np.asarray(matrix, np.float32)
    scale = vecfiles.make_scales(rows)
    codes, errors = vecfiles.quantize(rows, scale)
    return vecfiles.Matrix(codes, scale, errors)


def _round_query(y: np.ndarray) -> tuple[np.ndarray, float]:
    """(y rounded to integers in [-127, 127] as faiss's int8 kernel takes it, the factor back)."""
    top = float(np.abs(y).max()) if y.size else 0.0
    if top <= 0:
        return np.zeros(y.shape, np.float32), 1.0
    return np.rint(y * (127.0 / top)).astype(np.float32), top / 127.0


class Ivf:
    """An IVF index over the int8 codes of one generation; approximate, re-scored exactly.

    The k-means cells are learnt on the decoded rows (x_hat = codes / scales) and each row is put
    in the cell whose centre has its largest inner product, as a query picks the cells it scans;
    the cells hold the matrix's own codes (faiss's signed 8-bit direct codes, no residual), so a
    query scans a quarter of the float32 bytes and its scores are the int8 estimates q . x_hat
    themselves (the query is scaled by 1 / scales and rounded to integers, which `search`
    counts in the bound it returns). The cells' centres (`index.quantizer`) are in the decoded
    space: always search with `search` or `candidates`, never with faiss's own `index.search`."""

    def __init__(self, index, gen: int, scale: np.ndarray):
        self.index, self.gen = index, gen
        self.scale = np.asarray(scale, np.float32)
        self.inv = (1.0 / self.scale.astype(np.float64)).astype(np.float32)
        self.nprobe = IVF_NPROBE  # cells a query scans (`[settings] ivf_nprobe`)
        self.mapped = False  # the cells are a read-only map of the file (`load`)

    @classmethod
    def build(cls, meta_dir: Path, gen: int, matrix, threads: int = 2) -> "Ivf":
        import faiss

        matrix = as_matrix(matrix)
        faiss.omp_set_num_threads(threads)
        n, dim = matrix.shape
        nlist = ivf_cells(n)
        rng = np.random.default_rng(0)
        sample = np.sort(rng.choice(n, size=min(n, 40 * nlist), replace=False))
        cp = faiss.ClusteringParameters()
        cp.niter, cp.spherical = 10, True  # as faiss trains an inner-product IVF
        quant = faiss.IndexFlatIP(dim)
        faiss.Clustering(dim, nlist, cp).train(
            np.ascontiguousarray(matrix[sample], dtype=np.float32), quant
        )
        index = faiss.IndexIVFScalarQuantizer(
            quant,
            dim,
            nlist,
            faiss.ScalarQuantizer.QT_8bit_direct_signed,
            faiss.METRIC_INNER_PRODUCT,
            False,  # no residual: the codes are the matrix's, not the distance to a centre
        )
        index.is_trained = True  # direct codes need no training; the cells are learnt above
        ivf = cls(index, gen, matrix.scale)
        ivf._add(matrix, 0)
        (meta_dir / f"ivf-{gen}.faiss").unlink(missing_ok=True)  # float16 cells (before 2026-12-05)
        ivf._save(meta_dir)
        return ivf

    @classmethod
    def load(cls, meta_dir: Path, gen: int, matrix) -> "Ivf | None":
        """The saved index, or None when there is none or it is not what `build` writes for
        this matrix (another kind, width or code)."""
        import faiss

        path = ivf_path(meta_dir, gen)
        if not path.exists():
            return None
        # Memory-mapped where faiss can (>= 1.10): the cells' codes stay in the page cache,
        # shared, instead of each process's heap (398 MB at 1M rows; RssAnon 20 MB against
        # 410 MB after reading it in full), and opening takes 0.01 s instead of 0.4 s.
        flag = getattr(faiss, "IO_FLAG_MMAP_IFC", None)
        try:  # the derived class (an index faiss downcast)
            index = (
                faiss.read_index(str(path), flag)
                if flag is not None
                else faiss.read_index(str(path))
            )
        except RuntimeError:
            return None
        if (
            not isinstance(index, faiss.IndexIVFScalarQuantizer)
            or index.sq.qtype != faiss.ScalarQuantizer.QT_8bit_direct_signed
            or index.by_residual
            or index.metric_type != faiss.METRIC_INNER_PRODUCT
            or index.d != matrix.shape[1]
        ):
            return None
        ivf = cls(index, gen, matrix.scale)
        ivf.mapped = flag is not None
        return ivf

    @property
    def rows(self) -> int:
        return self.index.ntotal

    def _add(self, matrix, start: int) -> None:
        """Rows [start, len) of the matrix, each into the cell of its decoded row's best centre."""
        import faiss

        n = matrix.shape[0]
        for s in range(start, n, 100_000):
            e = min(n, s + 100_000)
            _, cell = self.index.quantizer.search(np.ascontiguousarray(matrix[s:e]), 1)
            cell = np.ascontiguousarray(cell[:, 0], dtype=np.int64)
            codes = np.ascontiguousarray(matrix.codes[s:e], dtype=np.float32)
            # the arrays are named: faiss reads them through pointers that hold no reference
            self.index.add_core(e - s, faiss.swig_ptr(codes), None, faiss.swig_ptr(cell))
        if self.index.ntotal != n:
            raise RuntimeError(f"IVF index holds {self.index.ntotal} rows, not {n}")

    def _save(self, meta_dir: Path) -> None:
        import faiss

        path = ivf_path(meta_dir, self.gen)
        tmp = path.with_name(path.name + ".tmp")
        faiss.write_index(self.index, str(tmp))
        tmp.replace(path)

    def extend(self, meta_dir: Path, matrix) -> None:
        if matrix.shape[0] > self.rows:
            if self.mapped:  # a map cannot grow: read the file in full, then add
                import faiss

                index = faiss.read_index(str(ivf_path(meta_dir, self.gen)))
                if index.ntotal != self.rows:
                    raise RuntimeError(f"{ivf_path(meta_dir, self.gen)} changed under a reader")
                self.index, self.mapped = index, False
            self._add(as_matrix(matrix), self.rows)
            self._save(meta_dir)

    def _scan(self, q: np.ndarray, k: int, lo: int, hi: int, nprobe: int | None):
        """(int8 scores under the rounded query, rows, y, yq, f): the k best rows of [lo, hi) in
        the nprobe cells whose centres have the largest inner product with q."""
        import faiss

        _threads()
        _, cells = self.index.quantizer.search(q[None], nprobe or self.nprobe)
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        y = q.astype(np.float64) * self.inv.astype(np.float64)
        yq, f = _round_query(y)
        x = np.ascontiguousarray(yq[None], dtype=np.float32)
        if lo > 0 or hi < self.rows:
            params = faiss.SearchParametersIVF()
            params.nprobe = cells.shape[1]
            sel = faiss.IDSelectorRange(lo, hi)
            params.sel = sel
        else:  # the whole matrix: the same parameters every time (made once, a few us each)
            kept = self.__dict__.setdefault("_params", {})
            params = kept.get(cells.shape[1])
            if params is None:
                params = kept[cells.shape[1]] = faiss.SearchParametersIVF()
                params.nprobe = cells.shape[1]
        dq = np.zeros(cells.shape, np.float32)
        d = np.empty((1, k), np.float32)
        ids = np.empty((1, k), np.int64)
        # every array is named: faiss reads them through pointers that hold no reference
        self.index.search_preassigned_c(
            1,
            faiss.swig_ptr(x),
            k,
            faiss.swig_ptr(cells),
            faiss.swig_ptr(dq),
            faiss.swig_ptr(d),
            faiss.swig_ptr(ids),
            False,
            params,
        )
        keep = ids[0] >= 0
        return d[0][keep], ids[0][keep].astype(np.int64), y, yq, f

    def search(
        self, matrix, q: np.ndarray, want: int, lo: int, hi: int, nprobe: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, bounds): the `RESCORE × want` rows of [lo, hi) with the best int8 estimates in
        the nprobe cells nearest q, and for each an upper bound of its exact cosine q . x (before
        float32 slack, `Matrix.slack`): estimate + what rounding the query left + ||q|| err[row]."""
        q = np.asarray(q, np.float32)
        d, rows, y, yq, f = self._scan(q, RESCORE * want, lo, hi, nprobe)
        dim = matrix.shape[1]
        # faiss adds integer products exactly (|sum| <= 127 x 127 x dim < 2^24 up to 1,040
        # dimensions); the query's rounding moves a row's estimate by at most ||c|| ||y - f yq||.
        off = float(np.linalg.norm(y - f * yq.astype(np.float64)))
        cmax = min(matrix.code_norm_max(), 127.0 * np.sqrt(dim))
        sums = 0.0 if dim <= 1040 else 4 * (dim + 4) * 2.0**-24 * 127.0**2 * dim
        qn = float(np.linalg.norm(q.astype(np.float64)))
        errs = np.asarray(matrix.errors[rows], np.float64)
        bound = f * (d.astype(np.float64) + sums) + cmax * off * (1 + 1e-6) + qn * errs
        return rows, bound.astype(np.float32)

    def candidates(
        self, q: np.ndarray, want: int, lo: int, hi: int, nprobe: int | None = None
    ) -> np.ndarray:
        """Row numbers of the `RESCORE × want` best int8 estimates in the nprobe nearest cells."""
        return self._scan(np.asarray(q, np.float32), RESCORE * want, lo, hi, nprobe)[1]


def int8_bounds(matrix, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """An upper bound of q . x for these rows from their int8 codes: codes . (q / scales) +
    ||q|| err[row] (before float32 slack, `Matrix.slack`), as the exact scan bounds every row."""
    q = np.asarray(q, np.float32)
    qn = np.float32(np.linalg.norm(q.astype(np.float64)))
    codes = matrix.take_codes(rows)
    return codes.astype(np.float32) @ matrix.query(q) + qn * np.asarray(
        matrix.errors[rows], np.float32
    )


IVF_FIRST = 1.5  # exact vectors read first per wanted row of an IVF query (see `settle`)


def settle(q, rows, bounds, k: int, slack: float, tighten, read, first: float | None = None):
    """(rows, exact scores) of the best k candidates, best first (ties: lower row first), reading
    as few exact vectors as the bounds allow; the same answer as reading every candidate's.

    `bounds` holds an upper bound of each candidate's exact score (`Ivf.search`), `tighten(rows)`
    a tighter one (`int8_bounds`), `read(rows)` their exact float32 vectors. The `first × k` best
    by bound are read; tau, the k-th best exact score among them, can only rise as more are read,
    so every other candidate whose bound (+ slack) is below tau is out, and the rest are read at
    once - tightened first, since the codes cost far less to read than a sealed vector. At most
    two reads of exact vectors, the second usually small (1M bench store, 40 candidates: the
    proof needed the best 17 by int8 bound at the median, 22 at the 90th percentile)."""
    q64 = np.asarray(q, np.float64)
    rows = np.asarray(rows, np.int64)
    bounds = np.asarray(bounds, np.float32)
    k = min(k, rows.size)
    if k == 0:
        return rows[:0], np.zeros(0, np.float32)
    order = np.lexsort((rows, -bounds))
    exact: dict[int, float] = {}

    def take(sel: np.ndarray) -> None:
        vecs = read(np.sort(sel))
        got = (np.asarray(vecs, np.float64) @ q64).astype(np.float32)
        exact.update(zip(np.sort(sel).tolist(), got.tolist()))

    def ranked():
        r = np.fromiter(exact.keys(), np.int64, len(exact))
        sc = np.fromiter(exact.values(), np.float32, len(exact))
        top = np.lexsort((r, -sc))[:k]
        return r[top], sc[top]

    first = IVF_FIRST if first is None else first
    m = min(rows.size, max(k, int(np.ceil(first * k))))
    take(rows[order[:m]])
    if m < rows.size:
        tau = float(ranked()[1][-1])
        rest = order[m:]
        rest = rest[bounds[rest] + slack >= tau]
        if rest.size:
            tight = np.asarray(tighten(rows[rest]), np.float32)
            rest = rest[tight + slack >= tau]
            if rest.size:
                take(rows[rest])
    return ranked()


def rescore(
    matrix: np.ndarray, q: np.ndarray, rows: np.ndarray, want: int
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cosines) of the best `want` of `rows`, best first (ties: lower row first), scored
    against `matrix` as given (a benchmark's float32 matrix, or the decoded int8 one)."""
    from .vectors import take_rows

    rows = np.sort(rows)  # ascending rows read the file in order
    scores = take_rows(matrix, rows) @ np.asarray(q, np.float32)
    order = np.lexsort((rows, -scores))[:want]
    return rows[order], scores[order]


def scanner_for(index, kind: str, vecs=None):
    """The per-process Fp16Scan or Ivf for the index's current generation, or None to use numpy.

    kind is "fp16", "int8" or "ivf". Built (and saved) on first use, extended when rows were
    appended. `vecs`: the matrix the caller has just had from `index.matrix()` (else read here).
    """
    if not have_faiss():
        return None
    if vecs is None:
        vecs, _ = index.matrix()
    gen = index._matrix[0][0]  # the generation of that matrix
    with _lock:
        cache = index.__dict__.setdefault("_scanners", {})
        cur = cache.get(kind)
        if cur is not None and cur.gen == gen and cur.rows >= vecs.shape[0]:
            return cur
        # Building or extending writes files another process may be writing too (a `ct serve`
        # and a `ct search` after a big import): one at a time, so no tail file is appended to at
        # offsets read from another process's header.
        with file_lock(index.meta_dir / SCAN_LOCK, timeout=lock_timeout(), what="vector scan copy"):
            if cur is not None and cur.gen != gen:
                cur = None
            if cur is None:
                if kind == "fp16":
                    cur = Fp16Scan(index.meta_dir, gen, vecs)
                elif kind == "int8":
                    cur = Int8Scan(index.meta_dir, gen, vecs)
                    # A store grown past INT8_MIN_ROWS no longer reads its float16 copy (768 MB at 1M rows).
                    cache.pop("fp16", None)
                    remove_chunks(index.meta_dir, gen, Fp16Scan.suffix)
                else:
                    cur = Ivf.load(index.meta_dir, gen, vecs)
                    if cur is None or cur.rows > vecs.shape[0]:
                        cur = Ivf.build(index.meta_dir, gen, vecs)
                cache[kind] = cur
            cur.extend(index.meta_dir, vecs)
        return cur
