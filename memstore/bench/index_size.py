"""The disposable index of one store: bytes per record, warm `Store.search` p50, vector recall.

    python -m memstore.bench.index_size STORE [--recall] [--queries 60] [--repeats 3]

Opening the store brings its index up to date (an index of another schema is rebuilt), so run it
on a copy of a benchmark store, never on the store itself. Absolute imports only: the file also
runs as a script against another checkout (`PYTHONPATH=OTHER python memstore/bench/index_size.py
STORE`), for a before/after on the same machine. `--recall` reads every record's vector from its
pack and compares the vector search's top 10 (ids and scores) with a float32 scan of them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

INDEX_FILES = ("index.db", "vectors-", "times-", "errors-", "scales-", "where-")


def sizes(store, n: int) -> list[str]:
    out, total = [], 0
    for p in sorted(store.meta_dir.iterdir()):
        if p.is_file() and p.name.startswith(INDEX_FILES):
            size = p.stat().st_size
            total += size
            out.append(f"  {p.name:24s} {size:>13,d} B  {size / n:8.1f} B a record")
    out.append(f"index total {total:,d} B = {total / n:.1f} B a record ({n:,d} records)")
    return out


def warm(store, queries: list[str], mode: str, repeats: int) -> str:
    for q in queries[:10]:
        store.search(q, k=10, mode=mode)
    walls = []
    cpu = time.process_time()
    for _ in range(repeats):
        for q in queries:
            t = time.perf_counter()
            store.search(q, k=10, mode=mode)
            walls.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu) / len(walls)
    walls.sort()
    return (
        f"warm {mode} Store.search, top 10: p50 {1000 * statistics.median(walls):.2f} ms, "
        f"p95 {1000 * walls[int(0.95 * len(walls))]:.2f} ms, CPU {1000 * cpu:.2f} ms a call "
        f"({len(walls)} calls)"
    )


def pack_matrix(store, index, since: float | None = None) -> tuple[list[tuple], np.ndarray]:
    """The reference a float32 scan runs on: (rows, vectors) of every searchable row (not hidden,
    with a vector, dated `since` or later), each row (id, vrow, rowid, ts), its vector read from
    the packs as float64."""
    from memstore.format import pack as packfmt

    packed = {}
    for day in packfmt.all_pack_days(store.root):
        packed.update({rid: v for rid, (v, _h) in packfmt.day_vectors(store.root, day).items()})
    rows = index.conn.execute(
        "SELECT id, vrow, rowid, ts FROM records WHERE vrow >= 0 AND hidden = 0"
    ).fetchall()
    rows = [r for r in rows if since is None or r[3] >= since]
    return rows, np.stack([packed[r[0]] for r in rows]).astype(np.float64)


def recall(store, index, queries: list[str]) -> str:
    from memstore.retrieve.search import Filters, vector_candidates

    rows, x = pack_matrix(store, index)
    found = same = 0
    for text in queries:
        q = np.asarray(store.embedder.embed_query(text), np.float32)
        scores = (x @ q.astype(np.float64)).astype(np.float32)
        best = np.lexsort(([r[1] for r in rows], -scores))[:10]
        want = [(rows[i][2], float(scores[i])) for i in best]
        got = vector_candidates(index, q, Filters(), 10)
        found += len({r for r, _ in got} & {r for r, _ in want})
        same += got == want
    return (
        f"vector recall@10 against a float32 scan of the {len(rows):,d} pack vectors: "
        f"{found / (10 * len(queries)):.3f}; identical top 10 (ids and scores): "
        f"{same}/{len(queries)}"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--recall", action="store_true")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from memstore.bench import synth
    from memstore.store import Store

    store = Store.open(args.store)
    index = store.index()
    n = index.stats()["records"]
    print("\n".join(sizes(store, n)))
    queries = synth.TextSource(seed=4).queries(args.queries)
    for mode in ("vector", "hybrid"):
        print(warm(store, queries, mode, args.repeats))
    if args.recall:
        print(recall(store, index, queries))


if __name__ == "__main__":
    main()
