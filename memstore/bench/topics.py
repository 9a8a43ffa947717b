"""The topic tree, measured: how many topics a store's records make, how pure they are, and what a
write's placement costs as the tree grows.

Run: `python -m memstore.bench.topics --data ../shared/bench-data/longmemeval` (quality on the first
3 LongMemEval dev haystacks with MiniLM, through the embedding cache), `--timing` (one
Store.write of 1k/2k/4k/10k turns and a one-turn write at 1k and 10k placed, hash embedder) and
`--store DIR` (the same figures for any store's tree, a conversation being a session: a store built
from a real export with `ct import`), `--build N --out-store DIR` (a store of N dev turns written
in one Store.write, topics on: what an import does; `placing_s` is its time in topic placement
and naming) and `--ct-add DIR,DIR,...` (`ct add`, a real process, on copies of those stores, the
adds taking turns across them).

Quality, per haystack (a store of one question's haystack, one Store.write in time order):
- topics per 1k records: topics that hold records, per 1,000 placed records;
- purity: the share of a topic's records from its majority session, over all placed records
  (a LongMemEval haystack's sessions are mostly unrelated chats, so a topic spanning two is a mix);
- topics per session: how many topics a session's records are spread over, mean over sessions;
- nested: topics holding records whose parent also holds records (a sub-topic of a real topic).
Timing records are LongMemEval dev turns too: distinct sessions of the dev haystacks in time order.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from . import lme

SIZES = (1000, 2000, 4000, 10000)


SETTINGS: dict = {}  # [settings] values the measured stores get (--set key=value)


def _store(root: Path, embedder_name: str, embedder=None):
    from ..store import Store

    store = Store.init(root, embedder=embedder_name, timezone="UTC")
    if SETTINGS:
        toml = store.root / "memstore.toml"
        lines = "".join(f"\n{k} = {v}" for k, v in SETTINGS.items())
        toml.write_text(toml.read_text().replace("[settings]", "[settings]" + lines, 1))
        store = Store(store.root)
    if embedder is not None:
        store.set_embedder(embedder)
    return store


def tree_figures(tree, session_of: dict[str, str]) -> dict:
    """Topics per 1k records, purity, topics per session and the tree's shape, from a Tree."""
    placed = {rid: tid for rid, tid in tree.topic_of().items() if rid in session_of}
    real = [t for t in tree.topics.values() if t.records]
    majority = 0
    for t in real:
        sessions = Counter(session_of[r] for r in t.records if r in session_of)
        majority += max(sessions.values()) if sessions else 0
    per_session: dict[str, set] = {}
    for rid, tid in placed.items():
        per_session.setdefault(session_of[rid], set()).add(tid)
    cmap = tree.children_map()
    nested = sum(1 for t in real if t.parent in tree.topics and tree.topics[t.parent].records)
    return {
        "records": len(placed),
        "sessions": len(per_session),
        "topics": len(real),
        "groups": len(tree.topics) - len(real),
        "topics_per_1k": 1000 * len(real) / max(len(placed), 1),
        "purity": majority / max(len(placed), 1),
        "topics_per_session": statistics.mean(len(v) for v in per_session.values())
        if per_session
        else 0.0,
        "nested": nested,
        "max_children": max((len(k) for k in cmap.values()), default=0),
        "depth": max((len(tree.ancestry(t)) for t in tree.topics), default=0),
        "names": sorted({t.name for t in real})[:12],
    }


def quality(data: Path, n: int, embedder_name: str, work: Path, log) -> dict:
    from ..adapters import get_embedder
    from ..format import tree as treefmt
    from .quality import warm_cache

    _file, questions = lme.load(data)
    chosen = [q for q in questions if not q.abstention][:n]
    embedder = get_embedder(embedder_name)
    rows = []
    for i, q in enumerate(chosen):
        hs = lme.haystack(q)
        warm_cache(embedder, [r["text"] for r in hs.records], log, f"haystack {i + 1}")
        store = _store(work / f"q{i}", embedder_name, embedder)
        t0 = time.perf_counter()
        store.write(
            [store.normalize(r) for r in hs.records],
            f"Import {q.qid}",
            secrets="allow",
        )
        row = {"qid": q.qid, "write_s": time.perf_counter() - t0}
        row.update(tree_figures(treefmt.read(store.root), hs.session_of))
        log(f"  {q.qid}: {json.dumps({k: v for k, v in row.items() if k != 'names'})}")
        rows.append(row)
    keys = ("topics_per_1k", "purity", "topics_per_session", "nested")
    return {
        "embedder": embedder_name,
        "haystacks": rows,
        "mean": {k: statistics.mean(r[k] for r in rows) for k in keys},
    }


def store_figures(root: Path) -> dict:
    """The tree figures of an existing store, each conversation record's session as its session."""
    from ..format import tree as treefmt
    from ..store import Store

    store = Store.open(root)
    session_of = {
        r["id"]: str(r["session"])
        for d in store.days()
        for r in store.day(d["day"])
        if r.get("session") and r.get("type") in ("text", "action")
    }
    return {"store": str(root), **tree_figures(treefmt.read(store.root), session_of)}


def timing_records(data: Path, total: int) -> list[dict]:
    """Distinct sessions' turns from the dev haystacks, in time order, `total` of them."""
    _file, questions = lme.load(data)
    seen: set[str] = set()
    sessions = []
    for q in questions:
        for s in q.sessions:
            if s.sid not in seen:
                seen.add(s.sid)
                sessions.append(s)
    sessions.sort(key=lambda s: (s.date, s.sid))
    out: list[dict] = []
    for k, s in enumerate(sessions):
        for j, turn in enumerate(s.turns):
            text = turn.get("content")
            if isinstance(text, str) and text.strip():
                out.append(
                    {
                        "id": f"tm-{k:05d}-{j:03d}",
                        "ts": s.date + lme.dt.timedelta(seconds=j),
                        "role": turn["role"],
                        "actor": turn["role"],
                        "type": "text",
                        "text": text,
                        "session": s.sid,
                    }
                )
        if len(out) >= total + 10:
            break
    return out


def _time_placement(store) -> list[float]:
    """Wrap the store's placement step (Store.place) so each write's time in it is recorded."""
    spent = [0.0]
    place = store.place

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return place(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t0)

    store.place = timed
    return spent


def timing(data: Path, sizes, work: Path, log, singles=(1000, 10000)) -> dict:
    from ..tree import topicdata

    pool = timing_records(data, max(sizes))
    out = {"embedder": "hash", "writes": [], "single": []}
    for n in sizes:
        store = _store(work / f"w{n}", "hash")
        placing = _time_placement(store)
        recs = [store.normalize(r) for r in pool[:n]]
        t0 = time.perf_counter()
        store.write(recs, f"Add {n} turns", secrets="allow")
        secs = time.perf_counter() - t0
        out["writes"].append({"records": n, "seconds": secs, "placing_s": placing[-1]})
        log(f"  one write of {n} records: {secs:.1f} s ({placing[-1]:.1f} s placing)")
        if n in singles:
            times, reads, places = [], [], []
            for j in range(3):
                rec = store.normalize(
                    {
                        "ts": "2030-01-0%dT10:00:00Z" % (j + 1),
                        "role": "user",
                        "text": f"A new question number {j}: how do I repot a fiddle leaf fig?",
                        "session": f"single-{j}",
                    }
                )
                before = topicdata.STATS["vectors"]
                t1 = time.perf_counter()
                store.write([rec], "Add one turn")
                times.append(time.perf_counter() - t1)
                places.append(placing[-1])
                reads.append(topicdata.STATS["vectors"] - before)
            out["single"].append(
                {
                    "placed": n,
                    "seconds": statistics.median(times),
                    "vectors_read": statistics.median(reads),
                    "placing_s": statistics.median(places),
                }
            )
            log(
                f"  a one-record write with {n} placed: {statistics.median(times):.3f} s "
                f"({statistics.median(places):.3f} s placing), {statistics.median(reads)} vectors read"
            )
        shutil.rmtree(store.root, ignore_errors=True)
    return out


def build(data: Path, n: int, root: Path, log) -> dict:
    """A store of the first `n` dev turns, written in one Store.write with topics on (hash embedder):
    what `ct import` of a conversation export does. Returns its figures (records/s end to end)."""
    pool = timing_records(data, n)
    store = _store(root, "hash")
    placing = _time_placement(store)
    recs = [store.normalize(r) for r in pool[:n]]
    t0, c0 = time.perf_counter(), time.process_time()
    store.write(recs, f"Import {n} turns", secrets="allow")
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    log(
        f"  one write of {n} turns: {secs:.1f} s ({n / secs:.0f} records/s; {cpu:.1f} s CPU; "
        f"{placing[-1]:.1f} s placing in topics)"
    )
    from ..format import tree as treefmt

    figures = tree_figures(treefmt.read(store.root), {r["id"]: r["session"] for r in recs})
    return {
        "records": n,
        "seconds": secs,
        "cpu_s": cpu,
        "per_s": n / secs,
        "placing_s": placing[-1],
        **figures,
    }


def _child_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ct_add(stores: list[Path], work: Path, runs: int, log, against: Path | None = None) -> dict:
    """`ct add` (a real `ct` process, git's processes included) on a copy of each store, after one
    warm-up add each; the timed adds take turns across the stores, so a slow spell of a shared
    machine falls on every size alike. Wall and CPU seconds (the process and its children).
    `against` (another checkout of memstore, e.g. an older commit) is timed too, on copies of its
    own, each of its adds right after this code's add on the same store."""
    import compileall
    import os
    import subprocess

    from ..errors import UsageError

    here = Path(__file__).resolve().parents[2]
    codes = [here] + ([Path(against).resolve()] if against else [])
    # byte code first: a process that compiles its modules (PYTHONDONTWRITEBYTECODE, a fresh
    # checkout) spends more on that than on the write
    for code in codes:
        compileall.compile_dir(code / "memstore", quiet=1)
    copies: dict[tuple[int, int], Path] = {}
    for c in range(len(codes)):
        for i, src in enumerate(stores):
            dst = work / f"add{c}-{i}"
            shutil.copytree(src, dst, symlinks=True)
            copies[c, i] = dst
    try:  # dev turns the stores do not hold (the pool's last ones), else made-up questions
        pool = timing_records(Path(DATA), 107_000)[-(runs + 1) * 2 :]
        texts = [r["text"][:400] for r in pool]
    except (OSError, ValueError, UsageError):
        texts = [f"Question {k}: how should I plan the garden bed number {k}?" for k in range(99)]

    def add(c: int, root: Path, k: int) -> tuple[float, float]:
        env = {**os.environ, "PYTHONPATH": str(codes[c])}
        c0, t0 = _child_cpu(), time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "memstore",
                "-C",
                str(root),
                "-q",
                "add",
                "--session",
                f"bench-{k}",
                "--allow-secrets",
                texts[k % len(texts)],
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=codes[c],  # (`python -m` puts the working folder first on the path)
        )
        return time.perf_counter() - t0, _child_cpu() - c0

    for (c, _i), root in copies.items():
        add(c, root, 0)
    wall: dict = {key: [] for key in copies}
    cpu: dict = {key: [] for key in copies}
    for k in range(1, runs + 1):
        for i in range(len(stores)):
            for c in range(len(codes)):
                w, t = add(c, copies[c, i], k)
                wall[c, i].append(w)
                cpu[c, i].append(t)
    out: dict = {}
    for c, code in enumerate(codes):
        rows = []
        for i, src in enumerate(stores):
            from ..format import tree as treefmt

            tree = treefmt.read(copies[c, i])
            rows.append(
                {
                    "store": str(src),
                    "code": str(code),
                    "placed": len(tree.topic_of()),
                    "topics": len(tree.topics),
                    "wall_s": statistics.median(wall[c, i]),
                    "cpu_s": statistics.median(cpu[c, i]),
                    "wall_samples": wall[c, i],
                    "cpu_samples": cpu[c, i],
                }
            )
            log(
                f"  ct add ({code}), {rows[-1]['placed']} placed: {rows[-1]['wall_s']:.3f} s wall, "
                f"{rows[-1]['cpu_s']:.3f} s CPU (median of {runs})"
            )
        first, last = rows[0], rows[-1]
        part = {
            "rows": rows,
            "wall_ratio": last["wall_s"] / first["wall_s"],
            "cpu_ratio": last["cpu_s"] / first["cpu_s"],
        }
        if c == 0:
            out.update(part)
        else:
            out["against"] = part
    return out


DATA = "../shared/bench-data/longmemeval"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m memstore.bench.topics", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--data", type=Path, default=Path("../shared/bench-data/longmemeval"), help="LongMemEval"
    )
    p.add_argument("--haystacks", type=int, default=3, help="dev haystacks for quality (3)")
    p.add_argument("--embedder", default="minilm", help="embedder for quality (minilm)")
    p.add_argument("--timing", action="store_true", help="write timing instead of quality")
    p.add_argument("--store", type=Path, help="the figures of this existing store's tree instead")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="records per timed write")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    p.add_argument(
        "--build", type=int, help="write this many dev turns into --out-store, one write"
    )
    p.add_argument("--out-store", type=Path, help="where --build makes its store (must not exist)")
    p.add_argument("--ct-add", help="stores (comma-separated, smallest first) to time ct add on")
    p.add_argument("--runs", type=int, default=9, help="timed ct adds per store (9)")
    p.add_argument(
        "--against", type=Path, help="with --ct-add: also time this memstore checkout, in turn"
    )
    p.add_argument(
        "--set", action="append", default=[], help="a [settings] value for the stores: key=number"
    )
    args = p.parse_args(argv)
    for item in args.set:
        key, _, value = item.partition("=")
        SETTINGS[key.strip()] = float(value) if "." in value else int(value)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    global DATA
    DATA = str(args.data)
    work = Path(tempfile.mkdtemp(prefix="ct-topics-"))
    try:
        if args.build:
            if args.out_store is None or args.out_store.exists():
                p.error("--build needs --out-store DIR, a folder that does not exist yet")
            result = build(args.data, args.build, args.out_store, log)
        elif args.ct_add:
            stores = [Path(x) for x in args.ct_add.split(",") if x]
            result = ct_add(stores, work, args.runs, log, args.against)
        elif args.store:
            result = store_figures(args.store)
        elif args.timing:
            sizes = [int(s) for s in args.sizes.split(",") if s]
            result = timing(args.data, sizes, work, log)
        else:
            result = quality(args.data, args.haystacks, args.embedder, work, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
