"""The fusion-weight sweep of docs/quality.md: hybrid search's weight on cosine over every LongMemEval_S dev question.

Run after `make bench-quality` has filled the embedding cache (then it takes minutes):
`python -m memstore.bench.fusion_sweep --data ../shared/bench-data`. Each question's store is built
from the cache exactly as the harness builds it; the product's own `hybrid_candidates` (pools of
300) are fused by `fuse_scores` at each weight (with the default role prior, as search does), and
by RRF for comparison; then, at the default weight, the role prior (`weigh_roles` for first-person
questions) at several strengths.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import lme

WEIGHTS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0)
PRIORS = (1.0, 0.9, 0.8, 0.7)  # the assistant's share of its fused score on first-person questions
POOL = 300


def sweep(
    data: Path, cache: Path, work: Path, limit: int | None = None, log=print
) -> dict[str, list[dict]]:
    """{setting: per-question rows with qtype and metrics}."""
    from .. import adapters
    from ..retrieve.search import (
        FUSION_WEIGHT,
        Filters,
        about_the_user,
        fuse_rrf,
        fuse_scores,
        hybrid_candidates,
        weigh_roles,
    )
    from .quality import build_store, query_vector

    os.environ["MEMSTORE_EMBED_CACHE"] = str(cache)
    embedder = adapters.get_embedder("minilm")
    _, questions = lme.load(data / "longmemeval")
    chosen = lme.stratified(questions, limit)
    out: dict[str, list[dict]] = {}
    t0 = time.perf_counter()
    for i, q in enumerate(chosen, start=1):
        hs = lme.haystack(q)
        root = work / f"q{i:04d}"
        store = build_store(
            root, embedder, hs.records, f"Import {len(hs.records)} LongMemEval turns ({q.qid})"
        )
        index = store.index(update=False)
        qvec = query_vector(embedder, q.question)
        exact, vector = hybrid_candidates(index, q.question, qvec, Filters(), POOL)
        ids = dict(index.conn.execute("SELECT rowid, id FROM records"))
        mine = about_the_user(q.question)
        rankings = {}
        for w in WEIGHTS:  # each with the default role prior, as search ranks
            fused = fuse_scores(index, qvec, exact, vector, weight=w)
            rankings[f"{w}"] = weigh_roles(index, fused) if mine else fused
        rankings["rrf"] = fuse_rrf({"exact": exact, "vector": vector})
        default = fuse_scores(index, qvec, exact, vector, weight=FUSION_WEIGHT)
        for prior in PRIORS:
            rankings[f"prior {prior}"] = weigh_roles(index, default, prior) if mine else default
        for name, ranked in rankings.items():
            turn_ids = [ids[r] for r, _, _ in ranked[:100]]
            out.setdefault(name, []).append(
                {"qtype": q.qtype, "metrics": lme.score(turn_ids, hs, q.gold_sessions)}
            )
        index.close()
        shutil.rmtree(root, ignore_errors=True)
        if i % 25 == 0 or i == len(chosen):
            log(f"  {i}/{len(chosen)} questions ({time.perf_counter() - t0:.0f} s)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memstore.bench.fusion_sweep", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--data", type=Path, default=Path("../shared/bench-data"))
    ap.add_argument("--cache", type=Path, default=Path(".bench/quality-embeddings.sqlite"))
    ap.add_argument("--limit", type=int, help="N questions per type (default: all)")
    args = ap.parse_args(argv)
    from ..retrieve.search import FUSION_WEIGHT

    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(
        dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    ) as tmp:
        results = sweep(args.data, args.cache, Path(tmp), args.limit, log=say)
    print(
        "| weight on cosine (role prior as default) | session R_all@5 | session nDCG@10 | turn R_any@10 | questions |"
    )
    print("|---|---|---|---|---|")
    for name, rows in results.items():
        a = lme.summarize(rows)["all"]
        label = {"rrf": "RRF k = 60"}.get(name, name)
        if name.startswith("prior"):
            label = f"{FUSION_WEIGHT}, role prior {name.split()[1]}"
        print(
            f"| {label} | {a['recall_all@5']:.3f} | {a['ndcg@10']:.3f} | {a[f'turn_recall_any@{lme.TURN_K}']:.3f} | {a['n']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
