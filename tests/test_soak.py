"""The plain-git soak: 4 clones in parallel processes against one bare remote, each doing random
adds, imports, forgets (of any clone's records), marks, gc and consolidating bursts, synced by a
random mix of `git pull` (merge), `git pull --rebase`, `git push` and `ct sync`. Afterwards: no
conflict on memstore's files, every clone holds exactly the records written minus those forgotten,
no forgotten text in any tracked file of any clone or of the remote's main, fsck clean.

The short version runs in `make test`; `make test-slow` runs 4 x 50 rounds with the hash embedder
and with MiniLM (docs/reliability.md has the figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ct
from memstore.format import log as logfmt
from memstore.store import Store

WORKER = Path(__file__).with_name("soak_worker.py")


def git(root, *args):
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def make_clones(
    tmp_path: Path, embedder: str, clones: int, init_args=()
) -> tuple[Path, list[Path]]:
    """A bare remote and `clones` clones of one new store pushed to it (the first made it, with
    `init_args` added to its `ct init`: e.g. --encrypt); every other clone has memstore's hooks,
    the rest are as a plain `git clone` leaves them."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    first = tmp_path / "c0"
    ct("init", first, "--embedder", embedder, "--timezone", "UTC", *init_args, process=True)
    git(first, "remote", "add", "origin", str(remote))
    roots = [first] + [tmp_path / f"c{i}" for i in range(1, clones)]
    for i, root in enumerate(roots):
        if i:
            git(tmp_path, "clone", "-q", str(remote), str(root))
            if i % 2:
                ct("-C", root, "hooks", "install")
        git(root, "config", "user.name", f"writer{i}")
        git(root, "config", "user.email", f"w{i}@example.invalid")
        if not i:
            ct("-C", root, "sync", "--set-upstream", "origin", process=True)
    return remote, roots


def worker_env(extra: dict | None = None) -> dict:
    """The environment of a worker process: this checkout's memstore first on the path."""
    return {
        **os.environ,
        **(extra or {}),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")])
        ),
    }


def run_workers(tmp_path: Path, roots, worker: Path, args_of, timeout: float, env_of=None):
    """One `worker` process per clone, all at once (`worker ROOT *args_of(i) OUT.json`, with
    `env_of(i)` added to its environment); then one ct sync each, twice round, so every clone has
    every other's last push. Returns the workers' reports and the seconds they ran."""
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                str(root),
                *map(str, args_of(i)),
                str(tmp_path / f"{root.name}.json"),
            ],
            env=worker_env(env_of(i) if env_of else None),
        )
        for i, root in enumerate(roots)
    ]
    assert [p.wait(timeout=timeout) for p in procs] == [0] * len(roots)
    took = time.monotonic() - started
    runs = [json.loads((tmp_path / f"{r.name}.json").read_text()) for r in roots]
    for _ in range(2):
        for root in roots:
            ct("-C", root, "sync", process=True)
    return runs, took


def soak(tmp_path: Path, embedder: str, rounds: int, clones: int = 4, seed: int = 2026) -> dict:
    remote, roots = make_clones(tmp_path, embedder, clones)
    runs, took = run_workers(tmp_path, roots, WORKER, lambda i: (seed + i, rounds), 3000)
    written = {k: v for r in runs for k, v in r["written"].items()}
    forgotten = {k: v for r in runs for k, v in r["forgotten"].items()}
    return {
        "roots": roots,
        "remote": remote,
        "runs": runs,
        "written": written,
        "forgotten": forgotten,
        "took": took,
    }


def check(res: dict) -> None:
    runs, roots = res["runs"], res["roots"]
    conflicts = [c for r in runs for c in r["conflicts"]]
    errors = [e for r in runs for e in r["errors"]]
    assert conflicts == [], conflicts
    assert errors == [], errors
    expected = set(res["written"]) - set(res["forgotten"])
    heads = {git(r, "rev-parse", "HEAD") for r in roots}
    assert len(heads) == 1, "clones did not converge"
    assert git(res["remote"], "rev-parse", "main") in heads
    for root in roots:
        ids = {}
        Store.open(root)  # an encrypted store's keys open with the identity in MEMSTORE_IDENTITY
        for path in git(root, "ls-files", "log").split():
            # read as memstore reads it: in an encrypted store each line is opened; a line the
            # identity cannot open fails the soak
            for line in logfmt.read_lines(root / path):
                assert line.record is not None, (root / path, line.line_no, line.error)
                rid = line.record["id"]
                ids[rid] = ids.get(rid, 0) + 1
        assert set(ids) == expected, (
            f"{root}: lost {expected - set(ids)}, extra {set(ids) - expected}"
        )
        assert max(ids.values(), default=1) == 1
        tracked = {
            p: (root / p).read_text(errors="replace")
            for p in git(root, "ls-files").split()
            if not p.endswith(".is")
        }
        back = [
            (p, t) for t in res["forgotten"].values() for p, text in tracked.items() if t in text
        ]
        assert back == [], f"{root}: forgotten text in the files: {back[:3]}"
        rep = json.loads(ct("-C", root, "fsck", "--json", check=False, process=True).stdout)
        assert rep["ok"] and rep["damage"] == [], rep
    remote_files = git(res["remote"], "ls-tree", "-r", "--name-only", "main").split()
    on_main = "".join(
        git(res["remote"], "show", f"main:{p}") for p in remote_files if p.endswith(".jsonl")
    )
    assert [t for t in res["forgotten"].values() if t in on_main] == []


def test_soak_of_plain_git_short(tmp_path):
    res = soak(tmp_path, "hash", rounds=8)
    check(res)
    assert len(res["written"]) > 10 and res["forgotten"]


@pytest.mark.slow
@pytest.mark.parametrize("embedder", ["hash", "minilm"])
def test_soak_of_plain_git(tmp_path, embedder):
    res = soak(tmp_path, embedder, rounds=50)
    check(res)
    report = os.environ.get("MEMSTORE_SOAK_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(
                json.dumps(
                    {
                        "embedder": embedder,
                        "rounds": 50 * 4,
                        "written": len(res["written"]),
                        "forgotten": len(res["forgotten"]),
                        "guard_refusals": sum(r["refused"] for r in res["runs"]),
                        "seconds": round(res["took"], 1),
                        "commits": int(git(res["roots"][0], "rev-list", "--count", "HEAD")),
                    }
                )
                + "\n"
            )
