"""The scale table of `make bench`: what a store costs git and the disk as it grows from 1k to 1M records.

For each synthetic store (memstore/bench/synth.py, built once and cached) the table gives: `ct add`
wall time (median of several real `ct` processes in a fresh local clone) and the part of it spent
inside git (from git's own trace2 timings), files in the repository, `.git/index` bytes, bytes on
disk and in git objects per record, and `git status` and `git clone` (local, with checkout) times.
Beside them, the goals of issue 12: `ct add` at the largest size within 1.25× of the smallest;
files in the repository bounded by days and writes, never growing with records; bytes on disk per
record at most 1.3× (day-log line + vector bytes).

Run alone: `python -m memstore.bench.scale --sizes 1000,10000,100000,1000000`; `make bench` runs it
through the speed benchmark (`MEMSTORE_BENCH_SCALE` sets the sizes there, `off` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import synth

DEFAULT_SIZES = (1_000, 10_000, 100_000)
ADD_RUNS = 15
FIXED_FILES = 8  # memstore.toml, .gitignore, .gitattributes, markers.jsonl, forgotten.jsonl and a little slack


@dataclass
class ScaleRow:
    """One store size's measurements (seconds and bytes)."""

    n: int
    days: int
    writes: int
    files: int
    index_bytes: int
    disk_per_record: float
    git_per_record: float
    content_per_record: float  # day-log line + vector bytes
    add_s: float
    add_git_s: float
    status_s: float
    clone_s: float
    add_samples: list[float] = field(default_factory=list)


def _git(*args, cwd=None, env=None) -> str:
    from ..gitrepo import run_git

    return run_git(args, cwd=cwd, env=env)


def _tracked_bytes(root: Path) -> tuple[int, int, int]:
    """(files in the repository, bytes they take on disk in blocks, day-log bytes)."""
    files = _git("-C", root, "ls-files", "-z").split("\0")
    files = [f for f in files if f]
    disk = logs = 0
    for f in files:
        st = os.stat(root / f)
        disk += st.st_blocks * 512
        if f.startswith("log/"):
            logs += st.st_size
    return len(files), disk, logs


def _dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _git_seconds(trace: Path) -> float:
    """Wall time of the git processes one command started (trace2 `exit` events of top-level processes).

    A `cat-file --batch` process lives as long as the command that opened it (gitpython keeps one
    to answer object queries) and mostly waits, so its lifetime is not git's work and is left out.
    """
    total = 0.0
    try:
        lines = trace.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return 0.0
    waiting: set[str] = set()
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        sid = str(ev.get("sid", ""))
        if ev.get("event") == "start" and any(
            str(a).startswith("--batch") for a in ev.get("argv", [])
        ):
            waiting.add(sid)
        elif ev.get("event") == "exit" and "/" not in sid and sid not in waiting:
            total += float(ev.get("t_abs", 0.0))
    return total


def _ct_add(root: Path, text: str, trace: Path, ts: str) -> float:
    # git takes an absolute path only (a relative one, as --base .bench gives, is no target)
    env = {**os.environ, "GIT_TRACE2_EVENT": str(trace.resolve())}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memstore", "-C", str(root), "-q", "add", "--ts", ts, text],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def _new_turn_times(root: Path, count: int) -> list[str]:
    """Times for the timed adds: now, or just after the store's last record when the synthetic history
    runs past now (the 1M store's days reach 2050). A new turn in a real store comes after its history;
    a turn dated inside it is a back-fill, which re-sorts the index's time-ordered matrix from that day on."""
    from datetime import datetime, timedelta, timezone

    start = datetime.now(timezone.utc)
    logs = sorted((root / "log").rglob("*.jsonl"))
    if logs:
        last = json.loads(logs[-1].read_text(encoding="utf-8").splitlines()[-1])["ts"]
        start = max(
            start, datetime.fromisoformat(last.replace("Z", "+00:00")) + timedelta(minutes=1)
        )
    return [(start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(count)]


@dataclass
class _Prepared:
    """One size's store and its fresh clone, ready for timed adds."""

    n: int
    src: Path
    dst: Path
    work: Path
    files: int
    disk: int
    logs: int
    vec_bytes: int
    days: int
    clone_s: float
    times: list[str]
    samples: list[float] = field(default_factory=list)
    git_parts: list[float] = field(default_factory=list)


def _prepare(base: Path, n: int, per_day: int, runs: int, log=print) -> _Prepared:
    """Build (or reuse) the n-record store, clone it and make the warm-up add."""
    store, info = synth.build_store(base, n, per_day, log=log)
    store.index()  # the clone starts from this index, as a user's store has one
    src = store.root
    files, disk, logs = _tracked_bytes(src)
    dim = int(store.config.embedder["dim"])
    vec_bytes = dim * (1 if store.config.setting("vector_dtype") == "int8" else 4)
    days = len(list((src / "log").rglob("*.jsonl")))
    work = Path(base) / f"scale-tmp-{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    _git("clone", "-q", src, work / "clone")
    clone_s = time.perf_counter() - t0
    dst = work / "clone"
    shutil.copytree(
        src / ".memstore",
        dst / ".memstore",
        ignore=shutil.ignore_patterns("*.lock", "journal*", "built.json"),
    )
    times = _new_turn_times(dst, runs + 1)
    _ct_add(dst, "scale warm-up: the index notices it moved", work / "warm.trace", times[0])
    return _Prepared(n, src, dst, work, files, disk, logs, vec_bytes, days, clone_s, times)


def _sample(p: _Prepared, i: int) -> None:
    trace = p.work / f"add-{i}.trace"
    p.samples.append(
        _ct_add(
            p.dst, f"scale probe {i}: review the trip budget on the tenth", trace, p.times[i + 1]
        )
    )
    p.git_parts.append(_git_seconds(trace))


def _finish(p: _Prepared, log=print) -> ScaleRow:
    status = []
    for _ in range(3):
        t0 = time.perf_counter()
        _git("-C", p.dst, "status", "--porcelain")
        status.append(time.perf_counter() - t0)
    writes = int(_git("-C", p.src, "rev-list", "--count", "HEAD").strip())
    n = p.n
    row = ScaleRow(
        n=n,
        days=p.days,
        writes=writes,
        files=p.files,
        index_bytes=(p.src / ".git" / "index").stat().st_size,
        disk_per_record=p.disk / n,
        git_per_record=_dir_bytes(p.src / ".git" / "objects") / n,
        content_per_record=p.logs / n + p.vec_bytes,
        add_s=statistics.median(p.samples),
        add_git_s=statistics.median(p.git_parts),
        status_s=statistics.median(status),
        clone_s=p.clone_s,
        add_samples=p.samples,
    )
    log(
        f"scale {n:,}: ct add {row.add_s * 1000:.0f} ms (git {row.add_git_s * 1000:.0f} ms), {row.files:,} files, "
        f"clone {row.clone_s:.2f} s"
    )
    return row


def measure_all(
    base: Path, sizes, per_day: int = 100, runs: int = ADD_RUNS, log=print
) -> list[ScaleRow]:
    """Every size's row. The timed adds take turns across the sizes (1k, 1M, 1k, 1M, …), so a
    burst of load on a shared machine falls on all sizes alike and the ratio between them holds."""
    prepared = []
    try:
        for n in sorted(sizes):
            prepared.append(_prepare(base, n, per_day, runs, log=log))
        for i in range(runs):
            for p in prepared:
                _sample(p, i)
        return [_finish(p, log=log) for p in prepared]
    finally:
        for p in prepared:
            shutil.rmtree(p.work, ignore_errors=True)


def measure(base: Path, n: int, per_day: int = 100, runs: int = ADD_RUNS, log=print) -> ScaleRow:
    """One size alone (see `measure_all`)."""
    return measure_all(base, [n], per_day, runs, log=log)[0]


def _size(n: int) -> str:
    return (
        f"{n // 1_000_000}M"
        if n >= 1_000_000 and n % 1_000_000 == 0
        else (f"{n // 1000}k" if n % 1000 == 0 else str(n))
    )


def _kib(b: float) -> str:
    return f"{b / 1024:,.0f} KiB" if b >= 10 * 1024 else f"{b:,.0f} B"


def goals(rows: list[ScaleRow]) -> list[tuple[str, str, bool]]:
    """(goal, what was measured, met) for the three goals of the scale table."""
    out = []
    lo, hi = rows[0], rows[-1]
    ratio = hi.add_s / lo.add_s
    out.append(
        (
            f"`ct add` at {_size(hi.n)} within 1.25× of {_size(lo.n)}",
            f"{hi.add_s * 1000:.0f} ms / {lo.add_s * 1000:.0f} ms = {ratio:.2f}×",
            ratio <= 1.25,
        )
    )
    worst = max(rows, key=lambda r: r.files - (2 * r.days + r.writes + FIXED_FILES))
    bound = 2 * worst.days + worst.writes + FIXED_FILES
    out.append(
        (
            "files in the repository ≤ days (a log and a pack each) + writes, never ∝ records",
            f"{worst.files:,} files ≤ 2 × {worst.days:,} days + {worst.writes:,} writes + {FIXED_FILES} at "
            f"{_size(worst.n)}"
            if worst.files <= bound
            else f"{worst.files:,} files > 2 × {worst.days:,} days + {worst.writes:,} writes + {FIXED_FILES} at {_size(worst.n)}",
            all(r.files <= 2 * r.days + r.writes + FIXED_FILES for r in rows),
        )
    )
    worst = max(rows, key=lambda r: r.disk_per_record / r.content_per_record)
    share = worst.disk_per_record / worst.content_per_record
    out.append(
        (
            "bytes on disk per record ≤ 1.3 × (day-log line + vector bytes)",
            f"{worst.disk_per_record:,.0f} B / {worst.content_per_record:,.0f} B = {share:.2f}× at {_size(worst.n)}",
            share <= 1.3,
        )
    )
    return out


def markdown(rows: list[ScaleRow]) -> str:
    """The scale section of the benchmark report."""
    if not rows:
        return ""
    head = ["measure", *(_size(r.n) for r in rows)]
    body = [
        (
            "`ct add` wall time (median of %d, fresh local clone)" % len(rows[0].add_samples),
            [f"{r.add_s * 1000:,.0f} ms" for r in rows],
        ),
        ("… of which inside git (trace2)", [f"{r.add_git_s * 1000:,.0f} ms" for r in rows]),
        ("files in the repository (`git ls-files`)", [f"{r.files:,}" for r in rows]),
        ("days / writes (commits)", [f"{r.days:,} / {r.writes:,}" for r in rows]),
        ("`.git/index`", [_kib(r.index_bytes) for r in rows]),
        (
            "bytes on disk per record (tracked files, in blocks)",
            [f"{r.disk_per_record:,.0f} B" for r in rows],
        ),
        ("bytes in git objects per record", [f"{r.git_per_record:,.0f} B" for r in rows]),
        (
            "day-log line + vector bytes per record",
            [f"{r.content_per_record:,.0f} B" for r in rows],
        ),
        ("`git status` (median of 3)", [f"{r.status_s * 1000:,.0f} ms" for r in rows]),
        ("`git clone` (local, with checkout)", [f"{r.clone_s:,.2f} s" for r in rows]),
    ]
    lines = [
        "",
        "## Scale",
        "",
        "Synthetic stores (memstore/bench/synth.py); `ct add` is a real `ct` process (Python start-up "
        "included) in a fresh `git clone` of the store, with the store's index copied beside it and no hooks "
        "installed, after one warm-up add; the timed adds take turns across the sizes; each add is a new turn dated after the store's last record (the 1M "
        "store's synthetic days run to 2050). Git's part is the wall time of the git processes it started, "
        "from git's trace2 events.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join([m, *cells]) + " |" for m, cells in body]
    lines += ["", "| goal | measured | verdict |", "|---|---|---|"]
    lines += [f"| {g} | {m} | {'pass' if ok else 'FAIL'} |" for g, m, ok in goals(rows)]
    return "\n".join(lines) + "\n"


def sizes_from_env(default=DEFAULT_SIZES) -> tuple[int, ...]:
    """`MEMSTORE_BENCH_SCALE`: comma-separated sizes, or `off`; unset means the default sizes."""
    raw = os.environ.get("MEMSTORE_BENCH_SCALE", "").strip().lower()
    if raw in ("off", "0", "no", "none"):
        return ()
    if not raw:
        return tuple(default)
    return tuple(int(float(s)) for s in raw.split(",") if s.strip())


def run_into(b) -> str:
    """The speed benchmark's hook: measure the sizes from the environment; the Markdown section (or "")."""
    sizes = sizes_from_env()
    if not sizes:
        return ""
    rows = measure_all(b.base, sizes, b.per_day, log=b.log)
    b.raw["scale"] = [r.__dict__ for r in rows]
    return markdown(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memstore.bench.scale", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="Store sizes, comma-separated."
    )
    ap.add_argument(
        "--with-1m",
        action="store_true",
        help="Add the 1,000,000-record store (builds once, minutes).",
    )
    ap.add_argument("--per-day", type=int, default=100)
    ap.add_argument("--runs", type=int, default=ADD_RUNS, help="Timed `ct add` runs per size.")
    ap.add_argument("--base", type=Path, default=Path(".bench"))
    ap.add_argument(
        "--json", dest="as_json", type=Path, default=None, help="Also write the raw numbers here."
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = sorted(
        {int(float(s)) for s in args.sizes.split(",") if s.strip()}
        | ({1_000_000} if args.with_1m else set())
    )
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    rows = measure_all(args.base, sizes, args.per_day, args.runs, log=say)
    print(markdown(rows))
    if args.as_json:
        args.as_json.write_text(json.dumps([r.__dict__ for r in rows], indent=1), encoding="utf-8")
    return 0 if all(ok for _, _, ok in goals(rows)) else 1


if __name__ == "__main__":
    sys.exit(main())
