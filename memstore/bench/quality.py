"""The retrieval-quality harness: public benchmarks loaded into real stores, scored through search and recall.

Run: `python -m memstore.bench.quality --data ../shared/bench-data --out docs/quality.md` (or
`make bench-quality`). LongMemEval_S gets one store per question (every turn a record, dated by its
session); SciFact one store of all abstracts. Each mode's ranking is the output of the library's
`search` (exact, vector, hybrid) or `recall` (hybrid+time); metrics are computed from those hits.
The report in --out is written by `quality_report.render` from the same results, which are also
kept as JSON next to the embedding cache.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from . import lme, scifact

MODES = ("exact", "vector", "naive-rrf", "hybrid-rrf", "hybrid-echo", "hybrid", "hybrid+time")
# The product's hybrid without issue 29's answers-first step: a question asked before stays where
# its wording ranks it (LongMemEval only; SciFact has no conversation to answer in).
ECHO_MODE = "hybrid-echo"
RRF_MODE = "hybrid-rrf"  # the product's hybrid with the rank fusion it used before issue 14
SEARCH_MODES = ("exact", "vector", "hybrid")
NAIVE = (
    "naive-rrf"  # the baseline: RRF(k=60) of plain BM25 (every query word) and plain MiniLM cosine
)
NAIVE_POOL = 1000
BENCHMARKS = ("longmemeval", "scifact")
SCIFACT_K = (10, 100)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m memstore.bench.quality", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--data",
        type=Path,
        default=Path("../shared/bench-data"),
        help="folder holding longmemeval/ and scifact/ (default ../shared/bench-data)",
    )
    p.add_argument("--lme", type=Path, help="LongMemEval file or folder (default DATA/longmemeval)")
    p.add_argument("--scifact", type=Path, help="SciFact folder (default DATA/scifact)")
    p.add_argument(
        "--out", type=Path, default=Path("docs/quality.md"), help="the Markdown report to write"
    )
    p.add_argument(
        "--limit",
        type=int,
        help="quick run: N LongMemEval questions per type, the first N SciFact claims",
    )
    p.add_argument(
        "--claims",
        type=int,
        help="SciFact claims to score (default: --limit when given, else all; 0 = all)",
    )
    p.add_argument("--only", choices=BENCHMARKS, help="run one benchmark")
    p.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}"
    )
    p.add_argument(
        "--embedder", default="minilm", choices=("minilm", "hash"), help="the stores' embedder"
    )
    p.add_argument(
        "--work",
        type=Path,
        help="where the temporary stores go (default: /dev/shm when writable, else the temp folder)",
    )
    p.add_argument("--keep", action="store_true", help="keep the stores after the run")
    p.add_argument(
        "--cache",
        type=Path,
        default=Path(".bench/quality-embeddings.sqlite"),
        help="embedding cache file (repeated turns and re-runs are not embedded again)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="write the report even when benchmark data is absent (those sections say so) and exit 0",
    )
    p.add_argument(
        "--echo-real",
        type=Path,
        help="figures of `python -m memstore.bench.echo_real --json` (question echoes on real "
        "exports), shown under Question echoes",
    )
    p.add_argument(
        "--note",
        help="a sentence on the run's conditions (a loaded machine, vectors computed elsewhere), "
        "shown under the machine line",
    )
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        p.error(
            f"--modes: unknown {', '.join(bad) or '(none given)'}; choose from {', '.join(MODES)}"
        )
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be at least 1")
    if args.claims is not None and args.claims < 0:
        p.error("--claims must be 0 (all) or more")
    args.claims = args.limit if args.claims is None else (args.claims or None)
    return args


def locate(args) -> tuple[dict[str, Path], list[dict]]:
    """The data path of each benchmark to run, and the ones whose data is absent (path and reason)."""
    wanted = [args.only] if args.only else list(BENCHMARKS)
    paths = {
        "longmemeval": args.lme or args.data / "longmemeval",
        "scifact": args.scifact or args.data / "scifact",
    }
    found, missing = {}, []
    from ..errors import UsageError

    for name in wanted:
        try:
            found[name] = (
                lme.find_file(paths[name])
                if name == "longmemeval"
                else scifact.find_root(paths[name])
            )
        except UsageError as exc:
            missing.append({"benchmark": name, "path": str(paths[name]), "reason": exc.message})
    return found, missing


# ----- LongMemEval -----------------------------------------------------------------------------


def build_store(root: Path, embedder, records: list[dict], message: str):
    """A fresh store at `root` holding `records` (one commit), its index built."""
    from ..store import Store

    store = Store.init(root, embedder=embedder.name, timezone="UTC")
    store.set_embedder(embedder)
    # Public benchmark text holds real leaked tokens; a write path that refuses secrets is told
    # to let them through here (the stores are thrown away after the run).
    store.write([store.normalize(r) for r in records], message, after_write=False, secrets="allow")
    store.index()
    return store


def lme_ranking(
    store, q: lme.Question, mode: str, hs: lme.Haystack
) -> tuple[list[str], str | None]:
    """Record ids best first for one mode, plus recall's level for hybrid+time.

    Enough hits are asked for to cover the top sessions (as the official turn-to-session scoring
    widens k until it has k distinct sessions): 50, then twice as many until the ranking holds
    max(KS) sessions or the mode has no more hits.
    """
    k = 50
    while True:
        ids, level = _ranking_at(store, q, mode, k)
        sessions = {hs.session_of.get(r) for r in ids}
        if len(sessions) >= max(lme.KS) or len(ids) < k or k >= len(hs.records):
            return ids, level
        k *= 2


def naive_rrf(store, query: str, k: int, qvec=None) -> list[str]:
    """Record ids by the textbook baseline, from the store's own index: FTS5 BM25 over every word of
    the query (no stop-word removal, no cleaning) and cosine over all vectors, fused by RRF with k=60."""
    from ..index.tokenize import query_terms
    from ..retrieve.search import Filters, fuse_rrf, vector_candidates

    index = store.index(update=False)
    terms = query_terms(query, drop_stop_words=False)
    exact = (
        []
        if not terms
        else [
            (r, float(sc))
            for r, sc in index.conn.execute(
                "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?",
                (" OR ".join(terms), NAIVE_POOL),
            )
        ]
    )
    qvec = store.embedder.embed_query(query) if qvec is None else qvec
    vector = vector_candidates(index, qvec, Filters(), NAIVE_POOL)
    ranked = fuse_rrf({"exact": exact, "vector": vector}, k=60)[:k]
    ids = (
        dict(
            index.conn.execute(
                f"SELECT rowid, id FROM records WHERE rowid IN ({','.join('?' * len(ranked))})",
                [r for r, _, _ in ranked],
            )
        )
        if ranked
        else {}
    )
    return [ids[r] for r, _, _ in ranked]


def query_vector(embedder, text: str):
    """The query's vector through the embedding cache (kind "query"), as search would compute it:
    a re-run, or a second mode on the same question, does not run the model again."""
    from ..adapters.cache import embed_cached

    return embed_cached(embedder, [text], kind="query")[0]


def _ranking_at(
    store, q: lme.Question, mode: str, k: int, carried: dict | None = None
) -> tuple[list[str], str | None]:
    """The ranked record ids of one mode (and the recall level); `carried` collects hit id ->
    the id of the question that came with it, the hit its answer (retrieve/answers.py)."""
    from ..retrieve.recall import recall
    from ..retrieve import search as _search

    def search(*args, **kwargs):
        hits = _search.search(*args, **kwargs)
        if carried is not None:
            for h in hits:
                asked = h.parts.get("question")
                if isinstance(asked, dict):
                    carried.setdefault(h.id, asked.get("id"))
        return hits

    qvec = query_vector(store.embedder, q.question)
    if mode in SEARCH_MODES:
        return [
            h.id
            for h in search(
                store, q.question, k=k, mode=mode, qvec=qvec if mode != "exact" else None
            )
        ], None
    if mode == NAIVE:
        return naive_rrf(store, q.question, k, qvec), None
    if mode == RRF_MODE:
        return [
            h.id for h in search(store, q.question, k=k, mode="hybrid", qvec=qvec, fusion="rrf")
        ], None
    if mode == ECHO_MODE:
        return [
            h.id for h in search(store, q.question, k=k, mode="hybrid", qvec=qvec, answers=False)
        ], None
    res = recall(store, q.question, now=q.date, k=k, update_index=False)
    # Ranked answers come best first; listings in time order keep the search score they were
    # chosen by, which restores their rank. Below them comes the rest of the plain hybrid ranking,
    # as an agent would fall back to `ct search` when the window's answer is not enough.
    # When recall reports that nothing in the window matched the words (window_only: the window's
    # lines by closeness; outside_window: the nearest matches in time), its note sends the agent
    # to search, so those answers do not lead the ranking.
    chosen = [rh.hit for rh in res.hits] if res.level in ("in_window", "all_time") else []
    rest = search(store, q.question, k=k, mode="hybrid", qvec=qvec)
    return lme.dedupe([h.id for h in chosen] + [h.id for h in rest])[
        : max(k, len(chosen))
    ], res.level


def warm_cache(embedder, texts: list[str], log, label: str, step: int = 2048) -> dict:
    """Embed every distinct text once into the cache, with progress, before any store is built.

    Store.write would do the same per store through the cache; doing it up front batches across
    stores, shows progress on the slow part, and keeps embedding out of the per-store build times.
    """
    from ..adapters.cache import UNCACHED, embed_cached

    texts = lme.dedupe(texts)
    if not getattr(
        embedder, "cacheable", embedder.name not in UNCACHED
    ):  # hash: recomputing beats a lookup
        return {"distinct_texts": len(texts), "seconds": 0.0, "cached": False}
    t0 = time.perf_counter()
    for i in range(0, len(texts), step):
        embed_cached(embedder, texts[i : i + step], kind="passage")
        log(
            f"  {label}: {min(i + step, len(texts))}/{len(texts)} distinct texts embedded or found in the cache "
            f"({time.perf_counter() - t0:.0f} s)"
        )
    return {"distinct_texts": len(texts), "seconds": time.perf_counter() - t0, "cached": True}


def run_longmemeval(path: Path, args, embedder, work: Path, log) -> dict:
    file, questions = lme.load(path)
    abstention = sum(q.abstention for q in questions)
    chosen = lme.stratified(questions, args.limit)
    log(
        f"LongMemEval: {len(chosen)} questions from {file} ({abstention} abstention questions skipped)"
    )
    haystacks = [lme.haystack(q) for q in chosen]
    embedding = warm_cache(
        embedder, [r["text"] for hs in haystacks for r in hs.records], log, "LongMemEval turns"
    )
    from ..retrieve.answers import is_question

    rows = []
    for i, (q, hs) in enumerate(zip(chosen, haystacks), start=1):
        bare = {r["id"] for r in hs.records if r["role"] == "user" and is_question(r["text"])}
        reply = lme.replies(hs)
        t0 = time.perf_counter()
        root = work / "lme" / f"q{i:04d}"
        store = build_store(
            root, embedder, hs.records, f"Import {len(hs.records)} LongMemEval turns ({q.qid})"
        )
        row = {
            "qid": q.qid,
            "qtype": q.qtype,
            "records": len(hs.records),
            "build_s": time.perf_counter() - t0,
            "metrics": {},
            "query_s": {},
            "echo": {},
            "level": None,
        }
        for mode in args.modes:
            t1 = time.perf_counter()
            ids, level = lme_ranking(store, q, mode, hs)
            row["query_s"][mode] = time.perf_counter() - t1
            # Turns as a search for ten returns them: the answers-first step orders the hits it
            # was asked for, so the first ten of a longer list are not what a user asking for ten sees.
            carried: dict[str, str] = {}
            top, _ = _ranking_at(store, q, mode, lme.TURN_K, carried)
            row["metrics"][mode] = lme.score(ids, hs, q.gold_sessions, lme.shown(top, carried))
            row["echo"][mode] = lme.echoes(top, hs, bare, reply, carried)
            if level:
                row["level"] = level
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        rows.append(row)
        if i % 10 == 0 or i == len(chosen):
            log(f"  {i}/{len(chosen)} questions ({row['build_s']:.1f} s to build the last store)")
    summary = {
        m: lme.summarize([{"qtype": r["qtype"], "metrics": r["metrics"][m]} for r in rows])
        for m in args.modes
    }
    levels: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["level"]:
            levels.setdefault(r["qtype"], {}).setdefault(r["level"], 0)
            levels[r["qtype"]][r["level"]] += 1
    return {
        "file": str(file),
        "questions_total": len(questions),
        "abstention_skipped": abstention,
        "limit": args.limit,
        "scored": len(rows),
        "summary": summary,
        "recall_levels": levels,
        "echoes": _echo_summary(rows, args.modes),
        "timing": _timing(rows, args.modes),
        "embedding": embedding,
        "rows": rows,
    }


def _echo_summary(rows: list[dict], modes: list[str]) -> dict:
    """Per mode: questions whose first hit is an answered bare question, echoes in the top ten, and
    how many of them rank below their answer (lme.echoes)."""
    return {
        m: {
            "questions": len(rows),
            "top1": sum(r["echo"][m]["top1"] for r in rows),
            "echoes": sum(r["echo"][m]["echoes"] for r in rows),
            "answer_above": sum(r["echo"][m]["answer_above"] for r in rows),
            "answer_in_slot": sum(r["echo"][m].get("answer_in_slot", 0) for r in rows),
        }
        for m in modes
    }


def _timing(rows: list[dict], modes: list[str]) -> dict:
    builds = [r["build_s"] for r in rows]
    out = {
        "records_mean": statistics.fmean(r["records"] for r in rows) if rows else 0,
        "build_s_mean": statistics.fmean(builds) if builds else 0.0,
        "build_s_max": max(builds, default=0.0),
        "query_ms_mean": {
            m: 1000 * statistics.fmean(r["query_s"][m] for r in rows) if rows else 0.0
            for m in modes
        },
    }
    out["question_s_mean"] = out["build_s_mean"] + sum(out["query_ms_mean"].values()) / 1000
    return out


# ----- SciFact ---------------------------------------------------------------------------------


def run_scifact(path: Path, args, embedder, work: Path, log) -> dict:
    sf = scifact.load(path)
    claims = sorted(sf.qrels, key=lambda q: (len(q), q))  # numeric ids in numeric order
    if args.claims:
        claims = claims[: args.claims]
    base = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    records = [
        {
            "id": f"scifact-{d}",
            "ts": base + dt.timedelta(seconds=i),
            "role": "system",
            "actor": "document",
            "type": "doc",
            "text": sf.document_text(d),
            "session": "scifact",
            "source": {"path": f"corpus.jsonl#{d}", "chunk": 0, "chunks": 1, "doc_id": d},
        }
        for i, d in enumerate(sf.docs)
    ]
    log(
        f"SciFact ({sf.layout} layout): {len(records)} abstracts, {len(claims)} judged claims from {sf.root}"
    )
    embedding = warm_cache(
        embedder, [r["text"] for r in records], log, "SciFact abstracts", step=256
    )
    t0 = time.perf_counter()
    store = build_store(
        work / "scifact", embedder, records, f"Ingest {len(records)} SciFact abstracts"
    )
    build_s = time.perf_counter() - t0
    from ..retrieve.search import search

    modes = [m for m in args.modes if m in SEARCH_MODES or m in (NAIVE, RRF_MODE)]
    doc_of = {r["id"]: r["source"]["doc_id"] for r in records}
    summary, query_ms = {}, {}
    for mode in modes:
        per_claim = []
        t1 = time.perf_counter()
        for qid in claims:
            qvec = None if mode == "exact" else query_vector(embedder, sf.queries[qid])
            if mode == NAIVE:
                ranked = [
                    doc_of[i] for i in naive_rrf(store, sf.queries[qid], max(SCIFACT_K), qvec)
                ]
            elif mode == RRF_MODE:
                ranked = [
                    h.source["doc_id"]
                    for h in search(
                        store,
                        sf.queries[qid],
                        k=max(SCIFACT_K),
                        mode="hybrid",
                        qvec=qvec,
                        fusion="rrf",
                    )
                ]
            else:
                ranked = [
                    h.source["doc_id"]
                    for h in search(store, sf.queries[qid], k=max(SCIFACT_K), mode=mode, qvec=qvec)
                ]
            per_claim.append(
                (
                    scifact.ndcg(ranked, sf.qrels[qid], 10),
                    scifact.recall(ranked, sf.qrels[qid], 100),
                )
            )
        query_ms[mode] = 1000 * (time.perf_counter() - t1) / max(1, len(claims))
        summary[mode] = {
            "ndcg@10": statistics.fmean(a for a, _ in per_claim),
            "recall@100": statistics.fmean(b for _, b in per_claim),
            "n": len(per_claim),
        }
        log(
            f"  {mode}: nDCG@10 {summary[mode]['ndcg@10']:.3f}, Recall@100 {summary[mode]['recall@100']:.3f}"
        )
    if not args.keep:
        shutil.rmtree(work / "scifact", ignore_errors=True)
    return {
        "root": str(sf.root),
        "layout": sf.layout,
        "notes": sf.notes,
        "docs": len(records),
        "claims": len(claims),
        "limit": args.claims,
        "summary": summary,
        "timing": {"build_s": build_s, "query_ms_mean": query_ms},
        "embedding": embedding,
    }


# ----- the run ---------------------------------------------------------------------------------


def run(args, log=None) -> dict:
    """Run the chosen benchmarks; raises UsageError naming every absent data path unless allowed."""
    from ..adapters import get_embedder
    from ..errors import UsageError

    log = log or (lambda m: None if args.quiet else print(m, file=sys.stderr, flush=True))
    echo_real = None
    if args.echo_real:
        try:
            echo_real = json.loads(args.echo_real.read_text(encoding="utf-8"))
            if not isinstance(echo_real, dict) or not isinstance(echo_real.get("exports"), list):
                raise ValueError("no exports list")
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"--echo-real {args.echo_real}: not the JSON of memstore.bench.echo_real ({exc})",
                "Nothing was measured and the report was left as it was.",
            ) from None
    found, missing = locate(args)
    if missing and not args.allow_missing:
        lines = [
            f"{m['benchmark']}: {m['reason']}"
            + ("" if Path(m["path"]).is_absolute() else f" (that is {Path(m['path']).resolve()})")
            for m in missing
        ]
        raise UsageError(
            "quality benchmark data is missing:\n  " + "\n  ".join(lines),
            "Nothing was measured and the report was left as it was. Pass --data DIR (the folder "
            "holding longmemeval/ and scifact/), or --allow-missing to write a report that says so.",
        )
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    os.environ["MEMSTORE_EMBED_CACHE"] = str(args.cache.resolve())  # the harness's own cache file
    report = {
        "command": " ".join(["python -m memstore.bench.quality", *sys.argv[1:]])
        if args.command is None
        else args.command,
        "embedder": args.embedder,
        "modes": args.modes,
        "missing": missing,
        "echo_real": echo_real,
        "started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "note": args.note,
    }
    embedder = get_embedder(args.embedder)
    report["embedder_model"] = embedder.model
    base = args.work or default_work()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="memstore-quality-", dir=base))
    report["work_dir"] = str(base)
    t0 = time.perf_counter()
    try:
        if "longmemeval" in found:
            report["longmemeval"] = run_longmemeval(found["longmemeval"], args, embedder, work, log)
        if "scifact" in found:
            report["scifact"] = run_scifact(found["scifact"], args, embedder, work, log)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report["wall_s"] = time.perf_counter() - t0
    report["kept"] = str(work) if args.keep else None
    return report


def default_work() -> Path:
    """A RAM disk when there is one: each store writes ~1,000 segment files, and the write path
    fsyncs every one (right for a user's memory, pure waiting for a throw-away benchmark store)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


TOPIC_SECTION = "## Topic tree"


def write_report(report: dict, out: Path, raw: Path) -> None:
    from .quality_report import render

    text = render(report)
    try:  # the topic tree's figures (memstore/bench/topics.py) are measured apart: kept as they are
        old = out.read_text(encoding="utf-8")
        if TOPIC_SECTION in old and TOPIC_SECTION not in text:
            text = text.rstrip("\n") + "\n\n" + TOPIC_SECTION + old.split(TOPIC_SECTION, 1)[1]
    except OSError:
        pass
    for path, text in (
        (out, text),
        (raw, json.dumps(report, indent=1, default=str) + "\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def main(argv=None) -> int:
    from ..errors import MemstoreError

    args = parse_args(argv)
    args.command = None if argv is None else " ".join(["python -m memstore.bench.quality", *argv])
    try:
        report = run(args)
    except MemstoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    raw = args.cache.with_name("quality-last.json")
    write_report(report, args.out, raw)
    if not args.quiet:
        print(f"wrote {args.out} (raw results: {raw})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
