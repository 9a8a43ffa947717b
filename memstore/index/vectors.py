"""The vector matrix: one float32 row per indexed record, ordered by time, in generation files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def matrix_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"vectors-{gen}.f32"


def ts_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"times-{gen}.f64"


def open_matrix(meta_dir: Path, gen: int, n_rows: int, dim: int):
    """(vectors, times) memory-mapped read-only; empty arrays for an empty index."""
    if n_rows == 0:
        return np.zeros((0, dim), np.float32), np.zeros(0, np.float64)
    vec = np.memmap(matrix_path(meta_dir, gen), dtype=np.float32, mode="r", shape=(n_rows, dim))
    ts = np.memmap(ts_path(meta_dir, gen), dtype=np.float64, mode="r", shape=(n_rows,))
    return vec, ts


def write_rows(
    meta_dir: Path, gen: int, start_row: int, vectors: np.ndarray, times: np.ndarray
) -> None:
    """Write rows [start_row, start_row+len) of generation `gen` (the file is extended as needed)."""
    for path, arr in ((matrix_path(meta_dir, gen), vectors), (ts_path(meta_dir, gen), times)):
        arr = np.ascontiguousarray(arr)
        row_bytes = arr.itemsize * (arr.shape[1] if arr.ndim == 2 else 1)
        mode = "r+b" if path.exists() else "w+b"
        with open(path, mode) as f:
            f.truncate(start_row * row_bytes)
            f.seek(start_row * row_bytes)
            f.write(arr.tobytes())
            f.flush()
            os.fsync(f.fileno())


def copy_prefix(meta_dir: Path, old_gen: int, new_gen: int, n_rows: int, dim: int) -> None:
    """Start generation `new_gen` with the first `n_rows` rows of `old_gen`."""
    for path_fn, row_bytes in ((matrix_path, 4 * dim), (ts_path, 8)):
        src, dst = path_fn(meta_dir, old_gen), path_fn(meta_dir, new_gen)
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            remaining = n_rows * row_bytes
            while remaining > 0:
                buf = fi.read(min(remaining, 1 << 24))
                if not buf:
                    break
                fo.write(buf)
                remaining -= len(buf)


def remove_generations(meta_dir: Path, keep: int) -> None:
    for p in meta_dir.glob("vectors-*.f32"):
        if p.name != matrix_path(meta_dir, keep).name:
            p.unlink(missing_ok=True)
    for p in meta_dir.glob("times-*.f64"):
        if p.name != ts_path(meta_dir, keep).name:
            p.unlink(missing_ok=True)
    # The faiss sidecars (index/ann.py) of other generations: float16 and int8 copies, IVF indexes.
    for p in [
        *meta_dir.glob("vectors-*.f16"),
        *meta_dir.glob("vectors-*.i8"),
        *meta_dir.glob("ivf-*.faiss"),
    ]:
        if p.name not in (f"vectors-{keep}.f16", f"vectors-{keep}.i8", f"ivf-{keep}.faiss"):
            p.unlink(missing_ok=True)
