"""Runs inside the chromadb virtualenv (scripts/chroma_venv.sh): the HNSW side of ann_vs_hnsw.py.

It imports only the standard library, numpy and chromadb (memstore is not installed there). It
reads the vectors and queries from the .npy files the parent wrote, so both sides search the same
float32 rows, and answers one JSON line per request on its stdout; every timing is taken here,
around `collection.query`, so the pipe is not counted. Requests (one JSON object a line):

  {"op": "build", "vectors": PATH, "queries": PATH, "dir": DIR}  -> build_s, configuration
  {"op": "open", "queries": PATH, "dir": DIR}                    -> configuration (built before)
  {"op": "ef", "ef": N}                                          -> configuration read back
  {"op": "query", "rows": [i, ...]}                              -> ids (row numbers), seconds
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def main() -> int:
    # The protocol owns the real stdout; anything chromadb prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    col = queries = None
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "build":
            vecs = np.load(req["vectors"])
            queries = np.load(req["queries"])
            client = chromadb.PersistentClient(
                path=req["dir"], settings=Settings(anonymized_telemetry=False)
            )
            col = client.create_collection(
                "ann-bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )
            batch = client.get_max_batch_size()
            t0 = time.perf_counter()
            for s in range(0, vecs.shape[0], batch):
                e = min(vecs.shape[0], s + batch)
                col.add(ids=[str(i) for i in range(s, e)], embeddings=vecs[s:e])
            reply = {"build_s": time.perf_counter() - t0, "count": col.count()}
            reply["configuration"] = dict(col.configuration.get("hnsw") or {})
            reply["chromadb"] = chromadb.__version__
        elif op == "open":  # the collection a previous child built, read back from disk
            queries = np.load(req["queries"])
            client = chromadb.PersistentClient(
                path=req["dir"], settings=Settings(anonymized_telemetry=False)
            )
            col = client.get_collection("ann-bench", embedding_function=None)
            reply = {"configuration": dict(col.configuration.get("hnsw") or {})}
        elif op == "ef":
            col.modify(configuration={"hnsw": {"ef_search": int(req["ef"])}})
            reply = {"configuration": dict(col.configuration.get("hnsw") or {})}
        elif op == "query":
            ids, secs = [], []
            for i in req["rows"]:
                q = queries[i : i + 1]
                t0 = time.perf_counter()
                r = col.query(query_embeddings=q, n_results=10, include=[])
                secs.append(time.perf_counter() - t0)
                ids.append([int(x) for x in r["ids"][0]])
            reply = {"ids": ids, "seconds": secs}
        else:
            reply = {"error": f"unknown op {op!r}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
