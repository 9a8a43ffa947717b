"""memstore's opt-in approximate index (IVF, index/ann.py) beside chromadb's HNSW, same vectors.

Run: `make bench-ann` (or `python -m memstore.bench.ann_vs_hnsw`). chromadb is not a dependency
of memstore: scripts/chroma_venv.sh installs a pinned version in its own venv (.bench/chromavenv),
and chroma_child.py runs there as a child process. Both sides read the same float32 vectors and
queries from .npy files, so they search identical rows.

Data: n unit vectors of dim 384 with a low intrinsic dimension (million.py's Gaussian mixture,
2,000 centres, as sentence embeddings have); the queries are drawn from the same mixture after
the stored rows, so none is a member of the set. Truth: the exact float32 top 10 of each query.

memstore's side is a real store holding the same vectors, filled by million.py's `build_index`
(each vector sealed in its day's pack, the index's int8 matrix, a row in index.db per record), and
timed two ways for each nprobe: the store's own call, `vector_candidates(index, q, Filters(), 10,
method="ivf")` (what `[settings] vector_index = "ivf"` runs, from `ann.IVF_MIN_ROWS` rows on; a
smaller store scans exactly), and the same functions without the SQL around them (`Ivf.search`
over the int8 cells, then `ann.settle`, which reads from the packs only the candidates' exact
vectors that their bounds cannot rule out; the rows' pack locations known beforehand). An exact
float32 numpy scan of an in-memory matrix is timed too. chromadb's side is a PersistentClient
collection (cosine space, default HNSW settings) queried through `collection.query`, first with
the default ef_search, then with ef_search raised until recall@10 >= the target.

Timing is interleaved: the queries are cut into blocks and every configuration runs each block in
turn (A B C … A B C …, the order rotated per block), so drift on a shared machine falls on all.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .million import DIM, clustered_vectors

ROOT = Path(__file__).resolve().parents[2]


def chroma_python(venv: Path) -> Path:
    """The chromadb venv's python, created by scripts/chroma_venv.sh if missing."""
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "chroma_venv.sh")],
        check=True,
        env={**os.environ, "CHROMA_VENV": str(venv)},
    )
    return venv / "bin" / "python"


class Chroma:
    """The child process in the chromadb venv, spoken to in JSON lines."""

    def __init__(self, python: Path):
        child = Path(__file__).with_name("chroma_child.py")
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [str(python), str(child)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"chromadb child exited (code {self.proc.wait()}); see stderr")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t.tolist())) / 10 for f, t in zip(found, truth)]))


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def run(
    n: int,
    n_queries: int,
    nprobes: list[int],
    efs: list[int],
    target: float,
    block: int,
    base: Path,
    log=print,
    warm: int = 10,
) -> dict:
    from ..index import ann, exact
    from ..retrieve.search import Filters, vector_candidates
    from .million import build_index

    t0 = time.perf_counter()
    # The queries follow the n rows in one draw of the mixture; the rows are drawn alone, as
    # million.build_index draws the store's (the same rows when n is a multiple of 100,000).
    qs = np.ascontiguousarray(clustered_vectors(n + n_queries)[n:])
    vecs = clustered_vectors(n)
    work = Path(tempfile.mkdtemp(prefix="ann-vs-hnsw-", dir=base))
    np.save(work / "vectors.npy", vecs)
    np.save(work / "queries.npy", qs)
    vecs.tofile(work / "exact.f32")
    del vecs
    mat = np.memmap(work / "exact.f32", dtype=np.float32, mode="r", shape=(n, DIM))
    scores = qs @ np.asarray(mat).T
    truth = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    del scores
    # The store: a real one (memstore.toml, git, index.db), its rows' vectors sealed in day
    # packs and its int8 matrix, filled by million.build_index with the same vectors
    # (clustered_vectors(n + q)[:n] == clustered_vectors(n)); cached under `base`.
    store, index = build_index(base, n, log)
    vrow_of = dict(index.conn.execute("SELECT rowid, vrow FROM records"))
    where = [None] * n  # (day, location) of every row, for the run without SQL
    for v, day, loc in index.conn.execute("SELECT vrow, day, vkey FROM records"):
        where[v] = (day, loc)
    log(
        f"data: {n:,} x {DIM} + {n_queries} queries, store ready in {time.perf_counter() - t0:.1f} s"
    )

    t = time.perf_counter()
    store.config.settings["ivf_nprobe"] = ann.IVF_NPROBE
    vector_candidates(index, qs[0], Filters(), 10, method="ivf")  # builds (or loads) the IVF
    ivf_build = time.perf_counter() - t
    ivf = ann.scanner_for(index, "ivf")
    matrix, _ = index.matrix()
    log(f"memstore IVF build (or load): {ivf_build:.1f} s, nlist {ivf.index.nlist}")
    reader = exact.Reader(index.store.root, DIM)

    def from_packs(rows):
        """Exact vectors of these rows read from their packs as exact.rows does, locations known."""
        got = np.empty((len(rows), DIM), np.float32)
        spots = [where[r] for r in rows.tolist()]
        for j in reader.read_into(got, spots):
            got[j] = reader.vector(*spots[j])
        return got

    python = chroma_python(base / "chromavenv")
    chroma = Chroma(python)
    children = [chroma]
    try:
        built = chroma.ask(
            op="build",
            vectors=str(work / "vectors.npy"),
            queries=str(work / "queries.npy"),
            dir=str(work / "chroma"),
        )
        log(
            f"chromadb {built['chromadb']} HNSW build: {built['build_s']:.1f} s {built['configuration']}"
        )
        default_ef = int(built["configuration"].get("ef_search", 100))
        # Raise ef_search until recall@10 reaches the target (untimed calibration). chromadb
        # applies a changed ef_search when a process opens the collection, not to the index one
        # already has loaded (measured: `modify` alone left recall unchanged), so each raised
        # setting is served by a fresh child that opens the collection after the change.
        rows = list(range(n_queries))
        tried = {}
        high = None
        by_ef = {default_ef: chroma}
        for ef in sorted({default_ef, *efs}):
            if ef not in by_ef:
                chroma.ask(op="ef", ef=ef)
                child = Chroma(python)
                children.append(child)
                child.ask(op="open", queries=str(work / "queries.npy"), dir=str(work / "chroma"))
                by_ef[ef] = child
            conf = by_ef[ef].ask(op="ef", ef=ef)["configuration"] if ef == default_ef else {}
            conf = conf or {"ef_search": ef}
            r = recall(by_ef[ef].ask(op="query", rows=rows)["ids"], truth)
            tried[ef] = r
            log(f"chromadb ef_search {conf.get('ef_search')}: recall@10 {r:.4f}")
            if r >= target:  # the default may reach it already: then no raised setting
                high = ef if ef > default_ef else None
                break

        def mem_ivf(nprobe):
            """The IVF stage and the exact settling the store's search runs, without its SQL."""

            def one(i):
                q = qs[i]
                rows, bounds = ivf.search(matrix, q, 10, 0, n, nprobe=nprobe)
                return ann.settle(
                    q,
                    rows,
                    bounds,
                    10,
                    matrix.slack(q),
                    lambda r: ann.int8_bounds(matrix, q, r),
                    from_packs,
                )[0]

            return one

        def store_ivf(nprobe):
            """The store's own call: `vector_candidates(..., method="ivf")`, SQL included."""

            def one(i):
                store.config.settings["ivf_nprobe"] = nprobe
                hits = vector_candidates(index, qs[i], Filters(), 10, method="ivf")
                return [vrow_of[r] for r, _ in hits]

            return one

        def mem_exact(i):
            s = mat @ qs[i]
            top = np.argpartition(-s, 9)[:10]
            return top[np.argsort(-s[top], kind="stable")]

        configs = [("memstore exact scan (numpy float32)", "mem", mem_exact)]
        for p in nprobes:
            tag = " (default)" if p == ann.IVF_NPROBE else ""
            configs.append((f"memstore IVF nprobe={p}{tag}, no SQL", "mem", mem_ivf(p)))
            configs.append((f"memstore vector_candidates ivf nprobe={p}{tag}", "mem", store_ivf(p)))
        configs.append(
            (f"chromadb HNSW ef_search={default_ef} (default)", "chroma", by_ef[default_ef])
        )
        if high is not None:
            configs.append((f"chromadb HNSW ef_search={high}", "chroma", by_ef[high]))

        res = {name: {"ids": {}, "s": []} for name, _, _ in configs}

        def do(name, kind, fn, block_rows, keep=True):
            if kind == "mem":
                for i in block_rows:
                    t = time.perf_counter()
                    ids = fn(i)
                    dt = time.perf_counter() - t
                    if keep:
                        res[name]["ids"][i] = [int(x) for x in ids]
                        res[name]["s"].append(dt)
            else:
                r = fn.ask(op="query", rows=block_rows)
                if keep:
                    for i, ids in zip(block_rows, r["ids"]):
                        res[name]["ids"][i] = ids
                    res[name]["s"].extend(r["seconds"])

        # Warm-up, untimed: each configuration answers the first `warm` queries once, so that
        # (with all of them) the pack pages the queries read are in the page cache, as chromadb's
        # index is in its process's memory.
        for name, kind, fn in configs:
            do(name, kind, fn, rows[:warm], keep=False)
        blocks = [rows[s : s + block] for s in range(0, n_queries, block)]
        t = time.perf_counter()
        for b, block_rows in enumerate(blocks):
            k = b % len(configs)
            for name, kind, fn in configs[k:] + configs[:k]:
                do(name, kind, fn, block_rows)
        log(f"timed phase: {time.perf_counter() - t:.1f} s")
    finally:
        for child in children:
            child.close()

    out = {
        "n": n,
        "dim": DIM,
        "queries": n_queries,
        "block": block,
        "warm": warm,
        "nlist": int(ivf.index.nlist),
        "ivf_build_s": ivf_build,
        "chroma_build_s": built["build_s"],
        "chromadb": built["chromadb"],
        "chroma_config": built["configuration"],
        "ef_calibration": tried,
        "target": target,
        "rows": [],
    }
    for name, _, _ in configs:
        found = [res[name]["ids"][i] for i in rows]
        s = res[name]["s"]
        out["rows"].append(
            {
                "name": name,
                "recall10": recall(found, truth),
                "p50_ms": 1e3 * pct(s, 50),
                "p99_ms": 1e3 * pct(s, 99),
                "samples": len(s),
            }
        )
    reader.close()
    for p in work.rglob("*"):
        if p.is_file():
            p.unlink()
    for p in sorted(work.rglob("*"), reverse=True):
        p.rmdir()
    work.rmdir()
    return out


def markdown(r: dict) -> str:
    chroma = [x for x in r["rows"] if x["name"].startswith("chromadb")]
    ref = chroma[-1]  # the HNSW setting that reaches the recall target (else its default)
    lines = [
        f"| configuration | recall@10 | p50 | p99 | p50 / {ref['name'].split(' HNSW ')[1]} "
        f"| p99 / same |",
        "|---|---|---|---|---|---|",
    ]
    for x in r["rows"]:
        lines.append(
            f"| {x['name']} | {x['recall10']:.4f} | {x['p50_ms']:.2f} ms | {x['p99_ms']:.2f} ms "
            f"| {x['p50_ms'] / ref['p50_ms']:.2f}× | {x['p99_ms'] / ref['p99_ms']:.2f}× |"
        )
    cal = ", ".join(f"{k}: {v:.4f}" for k, v in r["ef_calibration"].items())
    lines += [
        "",
        f"{r['n']:,} unit vectors × {r['dim']}, {r['queries']} queries (not in the set), "
        f"{r['rows'][0]['samples']} timed queries per configuration, interleaved in blocks of "
        f"{r['block']}, after {r['warm']} untimed ones each. Builds: memstore IVF {r['ivf_build_s']:.1f} s to build or load ({r['nlist']} cells, "
        f"the int8 codes; candidates settled from the packs); chromadb {r['chromadb']} HNSW {r['chroma_build_s']:.1f} s "
        f"(`collection.add`, {r['chroma_config']}). chromadb recall@10 by ef_search: {cal}.",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument(
        "--nprobe",
        default="32,64,96,128",
        help="IVF nprobe values (the store's default, `ivf_nprobe`, is 96)",
    )
    ap.add_argument("--ef", default="200,400,800,1600", help="ef_search values to try, in order")
    ap.add_argument("--target", type=float, default=0.99, help="recall@10 to raise ef_search to")
    ap.add_argument("--block", type=int, default=25, help="queries per interleaved block")
    ap.add_argument(
        "--warm",
        type=int,
        default=None,
        help="queries each configuration answers untimed first (default: all of them)",
    )
    ap.add_argument("--base", type=Path, default=ROOT / ".bench")
    ap.add_argument("--json", dest="as_json", type=Path, default=None)
    args = ap.parse_args(argv)
    args.base.mkdir(parents=True, exist_ok=True)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    t = time.perf_counter()
    r = run(
        args.n,
        args.queries,
        [int(x) for x in args.nprobe.split(",") if x.strip()],
        [int(x) for x in args.ef.split(",") if x.strip()],
        args.target,
        args.block,
        args.base,
        log=say,
        warm=args.queries if args.warm is None else args.warm,
    )
    r["wall_s"] = time.perf_counter() - t
    r["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}"
    print(markdown(r))
    print(f"\nTotal {r['wall_s']:.0f} s; {r['machine']}.")
    if args.as_json:
        args.as_json.write_text(json.dumps(r, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
