"""Benchmarks past 100k records: warm hybrid search at 1M, and the approximate (IVF) index against the exact scan.

A million records written as day logs and segments would take hours on a 2-core machine, so the
index is filled directly: a real store (memstore.toml, git) whose real index database gets 1M
`records` and FTS5 rows and a 1M x 384 int8 matrix, exactly as `Index.update` would lay them
out, and whose vectors are written, sealed, in real packs (uncommitted; one a day) that the rows'
locations point at, since the search re-scores its candidates from them. What is timed is the library's own candidate stage (`hybrid_candidates` + fusion); reading
the 10 hits' lines from the day logs is measured at 100k by speed.py and does not grow with N.
Vectors are a Gaussian mixture (clustered, like sentence embeddings), unit length.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from . import synth

VERSION = 3  # 3: vectors in packs, int8 matrix
DIM = 384


def clustered_vectors(n: int, seed: int = 11, centres: int = 2000, latent: int = 48) -> np.ndarray:
    """Unit vectors with a low intrinsic dimension, as sentence embeddings have: a Gaussian mixture
    in a 48-d latent space, mapped to 384-d, plus a little isotropic noise."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, latent)).astype(np.float32)
    lift = rng.standard_normal((latent, DIM)).astype(np.float32) / np.sqrt(latent)
    out = np.empty((n, DIM), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        z = c[rng.integers(0, centres, m)] + 0.7 * rng.standard_normal((m, latent)).astype(
            np.float32
        )
        block = z @ lift + 0.15 * rng.standard_normal((m, DIM)).astype(np.float32)
        out[s : s + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def query_vectors(matrix: np.ndarray, n: int, seed: int = 5) -> np.ndarray:
    """Queries near stored rows (a row plus noise), so each has real neighbours, as user queries do."""
    rng = np.random.default_rng(seed)
    q = matrix[np.sort(rng.choice(matrix.shape[0], n, replace=False))] + 0.6 * rng.standard_normal(
        (n, DIM)
    ).astype(np.float32) / np.sqrt(DIM)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def build_index(base: Path, n: int, log=print):
    """(store, index) with n records filled straight into a real index; cached under `base`."""
    from ..index import vectors as vecfiles
    from ..index.fresh import SCHEMA_VERSION
    from ..store import Store

    root = Path(base) / f"million-v{VERSION}-{n}"
    marker = root / ".memstore" / "built.json"
    try:  # a store filled by code with another index schema would be emptied on opening
        same = json.loads(marker.read_text()).get("schema") == SCHEMA_VERSION
    except (OSError, ValueError, AttributeError):
        same = False
    if same:
        st = Store.open(root, search_parents=False)
        return st, st.index(update=False)
    if root.exists():
        import shutil

        shutil.rmtree(root)
    t0 = time.perf_counter()
    st = Store.init(root, embedder="hash", timezone="UTC")
    index = st.index(update=False)
    conn = index.conn
    src = synth.TextSource(seed=21)
    start = 1_700_000_000.0
    vecs = clustered_vectors(n)
    times = start + np.arange(n, dtype=np.float64) * 30.0  # one record every 30 s, in matrix order
    roles = ("user", "assistant")
    where = write_packs(st.root, vecs, times, log)
    with conn:
        for s in range(0, n, 50_000):
            m = min(50_000, n - s)
            texts = src.texts(m)
            conn.executemany(
                "INSERT INTO records (rowid, id, day, line_no, off, len, ts, role, type, session, vrow,"
                " vkey) VALUES (?, ?, ?, ?, 0, 0, ?, ?, 'text', ?, ?, ?)",
                [
                    (
                        s + i + 1,
                        f"r{s + i}",
                        time.strftime("%Y-%m-%d", time.gmtime(times[s + i])),
                        s + i,
                        float(times[s + i]),
                        roles[(s + i) % 2],
                        f"s{(s + i) // 40}",
                        s + i,
                        where[s + i],
                    )
                    for i in range(m)
                ],
            )
            conn.executemany(
                "INSERT INTO fts (rowid, body) VALUES (?, ?)",
                [(s + i + 1, t) for i, t in enumerate(texts)],
            )
            log(f"  million bench: {s + m:,} / {n:,} rows")
        scale = vecfiles.make_scales(vecs)
        vecfiles.write_scales(index.meta_dir, 1, scale)
        codes, errors = vecfiles.quantize(vecs, scale)
        spots = [
            (i + 1, time.strftime("%Y-%m-%d", time.gmtime(times[i])), where[i]) for i in range(n)
        ]
        vecfiles.write_rows(index.meta_dir, 1, 0, codes, errors, times, spots)
        del codes, errors
        for key, value in (
            ("gen", "1"),
            ("n_rows", str(n)),
            ("schema", str(SCHEMA_VERSION)),
            ("embedder", index._embedder_key()),
        ):
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
    marker.write_text(
        json.dumps({"n": n, "build_s": time.perf_counter() - t0, "schema": SCHEMA_VERSION})
    )
    log(f"built {root.name} in {time.perf_counter() - t0:.0f} s")
    return st, index


def write_packs(root: Path, vecs: np.ndarray, times: np.ndarray, log=print) -> list[bytes]:
    """Each vector sealed in its day's pack (record i is `r<i>`, its key derived from i); returns
    each record's location (index/exact.py) in order."""
    import hashlib

    from ..format import pack as packfmt
    from ..index import exact

    days = [time.strftime("%Y-%m-%d", time.gmtime(t)) for t in times]
    where: list[bytes] = [b""] * len(days)
    start = 0
    while start < len(days):
        end = start
        while end < len(days) and days[end] == days[start]:
            end += 1
        keys = [
            (f"r{i}", hashlib.blake2b(f"r{i}".encode(), digest_size=32).digest())
            for i in range(start, end)
        ]
        w = packfmt.PackWriter(days[start], DIM)
        for (rid, key), i in zip(keys, range(start, end)):
            w.add_vector(rid, key, "0" * 16, vecs[i], "float32", int(times[i]))
        pk = packfmt.read(w.write(root))
        for item in pk.items(keys):
            where[int(item.record_id[1:])] = exact.item_location(pk, item)
        if end // 100_000 > start // 100_000:
            log(f"  million bench: packs for {end:,} / {len(days):,} rows")
        start = end
    return where


def _p50(fn, inputs, repeats: int = 1) -> tuple[float, float]:
    """(wall p50, CPU per call) after one warm-up call."""
    fn(inputs[0])
    walls = []
    c = time.process_time()
    for _ in range(repeats):
        for x in inputs:
            t = time.perf_counter()
            fn(x)
            walls.append(time.perf_counter() - t)
    return float(np.median(walls)), (time.process_time() - c) / (repeats * len(inputs))


def hybrid_at_scale(b, n: int = 1_000_000, n_queries: int = 20) -> dict:
    """Warm hybrid candidates + fusion at n rows: numpy scan of the int8 codes vs the default faiss stage (float16 or int8)."""
    from ..index import ann
    from ..retrieve.search import Filters, fuse_rrf, hybrid_candidates

    st, index = build_index(b.base, n, log=b.log)
    qv = query_vectors(clustered_vectors(n), n_queries)  # the vectors the packs hold
    words = synth.TextSource(seed=4).queries(n_queries)
    out = {}
    methods = ["exact"] + (["auto"] if ann.have_faiss() else [])
    for method in methods:

        def one(i, method=method):
            exact, vector = hybrid_candidates(index, words[i], qv[i], Filters(), 50, method=method)
            return fuse_rrf({"exact": exact, "vector": vector})[:10]

        if method == "auto":
            t, _ = synth_timed(lambda: one(0))  # builds (or loads) the scan's sidecar once
            out["fp16_prepare_s"] = t
        out[method] = _p50(one, list(range(n_queries)))
    # Same answers: both re-score exactly and prove the rest cannot enter, so the vector lists agree.
    if "auto" in out:
        from ..retrieve.search import vector_candidates

        agree = np.mean(
            [
                len(
                    {r for r, _ in vector_candidates(index, qv[i], Filters(), 10, method="exact")}
                    & {r for r, _ in vector_candidates(index, qv[i], Filters(), 10, method="auto")}
                )
                / 10
                for i in range(n_queries)
            ]
        )
        out["fp16_recall10"] = float(agree)
    return out


def synth_timed(fn):
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def ivf_curve(b, sizes=(250_000, 500_000, 1_000_000), n_queries: int = 50) -> list[dict]:
    """IVF build time, query p50 and recall@10 against the exact float32 scan, per size."""
    import faiss

    from ..index import ann

    full = clustered_vectors(max(sizes))
    rows = []
    for n in sizes:
        mat = full[:n]
        qv = query_vectors(mat, n_queries)
        exact = []
        for q in qv:
            s = mat @ q
            top = np.argpartition(-s, 9)[:10]
            exact.append(set(top.tolist()))
        tmp = Path(b.base) / f"ivf-{n}"
        tmp.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        ivf = ann.Ivf.build(tmp, 0, mat)
        build_s = time.perf_counter() - t0
        row = {"n": n, "build_s": build_s, "nlist": int(ivf.index.nlist), "probes": {}}
        for nprobe in (16, 64, 128, 256):

            def one(i, nprobe=nprobe, ivf=ivf):
                return ann.rescore(mat, qv[i], ivf.candidates(qv[i], 10, 0, n, nprobe=nprobe), 10)[
                    0
                ]

            wall, cpu = _p50(one, list(range(n_queries)))
            recall = float(
                np.mean([len(exact[i] & set(one(i).tolist())) / 10 for i in range(n_queries)])
            )
            row["probes"][nprobe] = {"p50_s": wall, "cpu_s": cpu, "recall10": recall}
        exact_wall, exact_cpu = _p50(
            lambda i: np.argpartition(-(mat @ qv[i]), 9)[:10], list(range(n_queries))
        )
        row["exact_p50_s"], row["exact_cpu_s"] = exact_wall, exact_cpu
        rows.append(row)
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
        del ivf
        faiss.omp_set_num_threads(1)
    return rows
