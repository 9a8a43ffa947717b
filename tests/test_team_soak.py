"""The team load soak: five clones write their share of records in random batches and sync against one
bare remote at the same time — most with `ct sync`, one with plain `git pull` (merge or rebase) and
`git push`. Afterwards: no conflict, no error, every clone at the same commit, every record written
held exactly once by every clone and by the remote's main, fsck clean.

The short version (5 x 60 records) runs in `make test`; `make test-slow` runs 5 x 2,000 and writes its
figures (throughput, retries) where MEMSTORE_SOAK_REPORT says (docs/reliability.md has them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ct
from test_soak import check, git, make_clones, run_workers

WORKER = Path(__file__).with_name("team_worker.py")


def sealed_team(tmp_path: Path, monkeypatch) -> tuple[list[str], dict]:
    """Two people, alice and bob: (the `ct init` arguments of a store sealed to both, a worker's
    environment by clone: even clones are alice's machines, odd ones bob's). The test process
    itself reads as alice."""
    idents = {}
    for name in ("alice", "bob"):
        path = tmp_path / f"{name}.key"
        out = ct("keys", "new", path).stdout.strip().splitlines()
        idents[name] = (str(path), out[-1])
    monkeypatch.setenv("MEMSTORE_IDENTITY", idents["alice"][0])
    return ["--encrypt", "--recipient", idents["bob"][1]], {
        i: {"MEMSTORE_IDENTITY": idents["bob" if i % 2 else "alice"][0]} for i in range(16)
    }


def team(tmp_path: Path, records: int, members: int = 5, seed: int = 31, sealed=None) -> dict:
    init_args, envs = sealed or ((), {})
    remote, roots = make_clones(tmp_path, "hash", members, init_args)
    modes = ["git" if i == members - 1 else "ct" for i in range(members)]
    runs, took = run_workers(
        tmp_path, roots, WORKER, lambda i: (seed + i, records, modes[i]), 5000, envs.get
    )
    written = {k: v for r in runs for k, v in r["written"].items()}
    return {
        "roots": roots,
        "remote": remote,
        "runs": runs,
        "written": written,
        "forgotten": {},
        "took": took,
        "sealed": bool(sealed),
    }


def check_team(res: dict, records: int, members: int) -> None:
    check(res)  # no conflict or error, converged, each record once in every clone, fsck clean
    assert len(res["written"]) == records * members
    on_main = git(res["remote"], "ls-tree", "-r", "--name-only", "main").split()
    lines = [
        line
        for p in on_main
        if p.startswith("log/")
        for line in git(res["remote"], "show", f"main:{p}").splitlines()
    ]
    if res["sealed"]:  # the remote holds sealed lines only; check() read them opened in the clones
        assert all(line.startswith("ms1.") for line in lines), [x[:40] for x in lines[:3]]
        assert len(lines) == records * members, "the remote's main lost or doubled lines"
        words = {w for text in res["written"].values() for w in text.split() if len(w) == 12}
        raw = "\n".join(lines)
        assert not [w for w in words if w in raw], "a record's word is plain on the remote"
        return
    ids = [json.loads(line)["id"] for line in lines]
    assert sorted(ids) == sorted(res["written"]), "the remote's main lost or doubled records"
    for root in res["roots"]:
        stat = json.loads(ct("-C", root, "stat", "--json", process=True).stdout)
        assert stat["records"] == records * members, (root, stat["records"])


def test_team_soak_short(tmp_path):
    res = team(tmp_path, records=60)
    check_team(res, 60, 5)


def test_team_soak_short_on_an_encrypted_store(tmp_path, monkeypatch):
    res = team(tmp_path, records=40, sealed=sealed_team(tmp_path, monkeypatch))
    check_team(res, 40, 5)


@pytest.mark.slow
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
def test_team_soak(tmp_path, monkeypatch, sealed):
    records, members = 2000, 5
    res = team(
        tmp_path,
        records=records,
        members=members,
        sealed=sealed_team(tmp_path, monkeypatch) if sealed else None,
    )
    check_team(res, records, members)
    report = os.environ.get("MEMSTORE_SOAK_REPORT")
    if report:
        runs = res["runs"]
        with open(report, "a") as f:
            line = {
                "soak": "team (encrypted store)" if sealed else "team",
                "members": members,
                "records": records * members,
                "seconds": round(res["took"], 1),
                "records_per_s": round(records * members / res["took"], 1),
                "syncs": sum(r["syncs"] for r in runs),
                "retries_ct_sync": sum(r["retries"] for r in runs if r["mode"] == "ct"),
                "retries_plain_push": sum(r["retries"] for r in runs if r["mode"] == "git"),
                "ct_syncs_run_again": sum(r["gave_up"] for r in runs),
                "commits": int(git(res["roots"][0], "rev-list", "--count", "HEAD")),
            }
            f.write(json.dumps(line) + "\n")
