"""A big import: every record lands, in one commit, placed once; git's part stays bounded."""

from __future__ import annotations

import json
import subprocess

from conftest import commits, ct, git_clean
from memstore.format import tree as treefmt


def _loose_objects(root) -> int:
    out = subprocess.run(
        ["git", "-C", str(root), "count-objects", "-v"], capture_output=True, text=True, check=True
    ).stdout
    return int(dict(line.split(": ") for line in out.splitlines())["count"])


def _turns(n_days: int, per_day: int) -> list[dict]:
    rows = []
    for d in range(n_days):
        day = f"2025-{1 + d // 28 % 12:02d}-{1 + d % 28:02d}"
        year = 2025 + d // (28 * 12)
        for k in range(per_day):
            role = "user" if k % 2 == 0 else "assistant"
            rows.append(
                {
                    "ts": f"{year}{day[4:]}T{8 + k:02d}:00:00Z",
                    "role": role,
                    "text": f"day {d} turn {k}: notes on subject {d % 37} and item {k}",
                    "session": f"s{d}",
                }
            )
    return rows


def test_an_import_lands_every_record_once_in_one_commit_and_packs_its_objects(store, tmp_path):
    rows = _turns(130, 4)  # 130 days: 260 day files, the objects of one big write
    src = tmp_path / "turns.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = len(commits(store.root))
    out = ct("-C", str(store.root), "import", "jsonl", str(src))
    assert out.returncode == 0, out.stderr
    assert len(commits(store.root)) == before + 1 and git_clean(store.root)
    ids = {r["id"] for d in store.days() for r in store.day(d["day"])}
    assert len(ids) == len(rows)
    tree = treefmt.read(store.root)
    placed = tree.topic_of()
    assert set(placed) == ids  # every turn placed, each in exactly one topic
    assert sum(len(t.records) for t in tree.topics.values()) == len(rows)
    # the write's objects went into one pack, not 500 loose files for a later gc --auto
    assert _loose_objects(store.root) == 0
    assert ct("-C", str(store.root), "fsck").returncode == 0
    # importing it again adds nothing and commits nothing
    again = ct("-C", str(store.root), "import", "jsonl", str(src))
    assert again.returncode == 0 and len(commits(store.root)) == before + 1


def test_a_small_write_leaves_git_its_loose_objects(store):
    store.add("one turn about the garden", ts="2026-01-01T10:00:00Z")
    assert _loose_objects(store.root) > 0  # packing is for big writes only
