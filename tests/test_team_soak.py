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


def team(tmp_path: Path, records: int, members: int = 5, seed: int = 31) -> dict:
    remote, roots = make_clones(tmp_path, "hash", members)
    modes = ["git" if i == members - 1 else "ct" for i in range(members)]
    runs, took = run_workers(tmp_path, roots, WORKER, lambda i: (seed + i, records, modes[i]), 5000)
    written = {k: v for r in runs for k, v in r["written"].items()}
    return {
        "roots": roots,
        "remote": remote,
        "runs": runs,
        "written": written,
        "forgotten": {},
        "took": took,
    }


def check_team(res: dict, records: int, members: int) -> None:
    check(res)  # no conflict or error, converged, each record once in every clone, fsck clean
    assert len(res["written"]) == records * members
    on_main = git(res["remote"], "ls-tree", "-r", "--name-only", "main").split()
    ids = [
        json.loads(line)["id"]
        for p in on_main
        if p.startswith("log/")
        for line in git(res["remote"], "show", f"main:{p}").splitlines()
    ]
    assert sorted(ids) == sorted(res["written"]), "the remote's main lost or doubled records"
    for root in res["roots"]:
        stat = json.loads(ct("-C", root, "stat", "--json", process=True).stdout)
        assert stat["records"] == records * members, (root, stat["records"])


def test_team_soak_short(tmp_path):
    res = team(tmp_path, records=60)
    check_team(res, 60, 5)


@pytest.mark.slow
def test_team_soak(tmp_path):
    records, members = 2000, 5
    res = team(tmp_path, records=records, members=members)
    check_team(res, records, members)
    report = os.environ.get("MEMSTORE_SOAK_REPORT")
    if report:
        runs = res["runs"]
        with open(report, "a") as f:
            line = {
                "soak": "team",
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
