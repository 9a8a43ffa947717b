"""Runs inside ContextTape's own virtualenv: builds an ISStore from given vectors and times its search.

It imports only numpy and contexttape (memstore is not installed there), reads its inputs from
files the benchmark wrote, and prints one JSON object, so all timing happens in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def build(folder: str, vectors_path: str, texts_path: str) -> dict:
    """Fill `folder` with text/vector pairs through ContextTape's own append API (once)."""
    from contexttape import ISStore

    done = os.path.join(folder, "built.json")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as f:
            return json.load(f)
    vecs = np.load(vectors_path)
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    os.makedirs(folder, exist_ok=True)
    store = ISStore(folder)
    if store.next_id:
        raise SystemExit(f"{folder} holds a half-built ContextTape store; delete it and rerun")
    t0 = time.perf_counter()
    for text, vec in zip(texts, vecs):
        store.append_text_with_embedding(text, vec, quantize=False)
    info = {"n": len(texts), "build_s": time.perf_counter() - t0}
    with open(done, "w", encoding="utf-8") as f:
        json.dump(info, f)
    return info


def search(folder: str, queries_path: str, repeats: int, top_k: int, budget_s: float) -> dict:
    """Time `search_by_vector` per query (after one warm-up call), stopping early past `budget_s`."""
    import contexttape
    from contexttape import ISStore

    qs = np.load(queries_path)
    store = ISStore(folder)
    store.search_by_vector(qs[0], top_k=top_k)  # warm the page cache like our warm queries
    times, tops = [], []
    start = time.perf_counter()
    for _ in range(repeats):
        for q in qs:
            t = time.perf_counter()
            hits = store.search_by_vector(q, top_k=top_k)
            times.append(time.perf_counter() - t)
            if len(tops) < len(qs):
                tops.append(store.read_text(hits[0][1]) if hits else None)
            if time.perf_counter() - start > budget_s:
                break
        if time.perf_counter() - start > budget_s:
            break
    return {
        "times": times,
        "top_texts": tops,
        "version": getattr(contexttape, "__version__", "?"),
        "pairs": len(store.list_pairs()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", required=True)
    ap.add_argument("--build-from", nargs=2, metavar=("VECTORS_NPY", "TEXTS_JSON"))
    ap.add_argument("--queries")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args(argv)
    out: dict = {}
    if args.build_from:
        out["build"] = build(args.folder, *args.build_from)
    if args.queries:
        out["search"] = search(args.folder, args.queries, args.repeats, args.top_k, args.budget_s)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
