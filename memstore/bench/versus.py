"""`ct add`, `ct search`, `ct context` and `ct forget` at one store size, this checkout beside another
source tree, in turn.

A change to the write path is judged against the code before it: each side builds its own synthetic
store with its own code (memstore/bench/synth.py, so each gets the format it writes), clones it as a
user's machine would hold it, then the timed commands alternate — this add, that add, this add, …,
then the same for searches, context packs and forgets of one record by id, spread over the days —
so a burst of load on a shared machine falls on both sides alike. Every command is a real `ct` process run from that side's tree.

    git worktree add /tmp/before <commit>
    python -m memstore.bench.versus --other /tmp/before --n 100000

Prints a Markdown table: median and spread of each side and the ratio this/other per command, with
the ratio of each alternating pair (its median is the figure that holds under noise).
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

from .scale import _git, _new_turn_times

HERE = Path(__file__).resolve().parents[2]

_BUILD = """
import sys
from pathlib import Path
from memstore.bench import synth
store, _ = synth.build_store(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), log=lambda m: None)
store.index()
import memstore
print(memstore.__file__)
print(store.root)
"""


@dataclass
class Side:
    """One source tree, its store's clone and the seconds each timed command took."""

    name: str
    src: Path
    clone: Path = Path()
    times: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    took: dict[str, list[float]] = field(default_factory=dict)

    def env(self) -> dict:
        """The children's environment: this side's tree first on the path, and byte code allowed
        (an installed memstore runs from compiled modules; a side compiled on every run would pay
        for its lines, not for its work)."""
        path = os.environ.get("PYTHONPATH", "")
        env = {
            **os.environ,
            "PYTHONPATH": f"{self.src}{os.pathsep}{path}" if path else str(self.src),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def ct(self, *args: str) -> float:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "memstore", "-C", str(self.clone), "-q", *args],
            env=self.env(),
            cwd=self.src,  # `python -m` puts the working folder first on the path
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: ct {' '.join(args)} failed: {done.stderr.strip()}")
        return took


def _spread_ids(clone: Path, count: int) -> list[str]:
    """Record ids from `count` days spread over the store (one per day, from the middle of it)."""
    logs = sorted((clone / "log").rglob("*.jsonl"))
    step = max(1, len(logs) // max(1, count))
    ids = []
    for path in logs[::step][:count]:
        lines = path.read_text(encoding="utf-8").splitlines()
        ids.append(json.loads(lines[len(lines) // 2])["id"])
    return ids


def prepare(side: Side, base: Path, n: int, per_day: int, runs: int, log=print) -> None:
    """Build (or reuse) this side's store with its own code, clone it and make one warm-up add."""
    base = base / "".join(c if c.isalnum() else "-" for c in side.name)
    base.mkdir(parents=True, exist_ok=True)
    subprocess.run(  # both sides timed from byte code, as installed
        [sys.executable, "-m", "compileall", "-q", str(side.src / "memstore")],
        env=side.env(),
        check=True,
        capture_output=True,
    )
    log(f"{side.name}: building the {n:,}-record store with {side.src}")
    built = subprocess.run(
        [sys.executable, "-c", _BUILD, str(base), str(n), str(per_day)],
        env=side.env(),
        cwd=side.src,  # `python -c` puts the working folder first on the path
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        raise RuntimeError(f"{side.name}: building the store failed: {built.stderr.strip()}")
    package, root = built.stdout.strip().splitlines()[-2:]
    if not Path(package).resolve().is_relative_to(side.src):
        raise RuntimeError(f"{side.name}: memstore came from {package}, not from {side.src}")
    src = Path(root)
    work = base / f"clone-{n}"
    shutil.rmtree(work, ignore_errors=True)
    _git("clone", "-q", src, work)
    shutil.copytree(
        src / ".memstore",
        work / ".memstore",
        ignore=shutil.ignore_patterns("*.lock", "journal*", "built.json"),
    )
    side.clone = work
    side.times = _new_turn_times(work, runs + 1)
    side.ids = _spread_ids(work, runs + 1)
    side.ct("add", "--ts", side.times[0], "versus warm-up: the index notices it moved")
    side.ct("forget", side.ids[0])


QUERIES = (
    "the trip budget for the summer",
    "what did we decide about the kitchen",
    "notes on the garden and the fence",
    "the meeting with the bank last spring",
    "which book did I want to read next",
)

# (command, its arguments for run i of a side), timed in this order
COMMANDS = (
    ("add", lambda s, i: ["add", "--ts", s.times[i], f"versus probe {i}: the trip budget"]),
    ("search", lambda s, i: ["search", QUERIES[i % len(QUERIES)]]),
    ("context", lambda s, i: ["context", QUERIES[(i + 2) % len(QUERIES)]]),
    ("forget", lambda s, i: ["forget", s.ids[i]]),
)


def measure(sides: list[Side], runs: int) -> None:
    """The timed commands, alternating between the sides, one command at a time."""
    for cmd, args in COMMANDS:
        for i in range(1, runs + 1):
            for s in sides:
                s.took.setdefault(cmd, []).append(s.ct(*args(s, i)))


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:,.0f} ms ({min(xs) * 1000:,.0f}–{max(xs) * 1000:,.0f})"


def markdown(this: Side, other: Side, n: int) -> str:
    rows = [
        f"| command at {n:,} records | {this.name} | {other.name} | ratio of medians | median of pair ratios |",
        "|---|---|---|---|---|",
    ]
    for cmd, _ in COMMANDS:
        a, b = this.took[cmd], other.took[cmd]
        pairs = [x / y for x, y in zip(a, b)]
        rows.append(
            f"| `ct {cmd}` | {_ms(a)} | {_ms(b)} | "
            f"{statistics.median(a) / statistics.median(b):.2f}× | {statistics.median(pairs):.2f}× |"
        )
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memstore.bench.versus", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--other", type=Path, required=True, help="Another memstore source tree.")
    ap.add_argument("--n", type=int, default=100_000, help="Records in each store.")
    ap.add_argument("--per-day", type=int, default=100)
    ap.add_argument("--runs", type=int, default=9, help="Timed runs of each command per side.")
    ap.add_argument("--base", type=Path, default=Path(".bench/versus"))
    ap.add_argument("--json", dest="as_json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not (args.other / "memstore" / "__init__.py").is_file():
        ap.error(f"--other {args.other}: no memstore package there")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    this = Side("this checkout", HERE)
    other = Side(args.other.name or str(args.other), args.other.resolve())
    for s in (this, other):
        prepare(s, args.base.resolve(), args.n, args.per_day, args.runs, log=say)
    measure([this, other], args.runs)
    print(markdown(this, other, args.n))
    if args.as_json:
        raw = {s.name: s.took for s in (this, other)}
        args.as_json.write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
