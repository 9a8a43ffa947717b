"""`ct upgrade` on a format-1 store built by the previous release's code (commit 95c8976, the last format-1 one).

The old code is taken from this repository's history (`git archive`) and run with PYTHONPATH
pointing at it, so the store is exactly what that release wrote: conversation turns placed in
tree.json, document chunks, an ingest-any original as a blob segment. The upgrade must keep every
record (less `seg`), every vector bit for bit and every search result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import commits, ct, git_clean

REPO = Path(__file__).resolve().parent.parent
PREVIOUS_RELEASE = "95c8976"
QUERIES = [
    "trip budget",
    "ficus water",
    "release thursday",
    "night train tickets",
    "car insurance",
    "marathon sunday",
    "tram old town",
    "groceries december",
    "dentist appointment",
    "passports",
    "flat alfama",
    "yoga tuesday",
    "household budget euros",
    "failing test",
    "charger",
    "checklist flights",
    "photo of the ficus",
    "budget review tenth",
    "lisbon",
    "what did we decide",
]


@pytest.fixture(scope="module")
def old_code(tmp_path_factory):
    """The previous release's `memstore` package, unpacked from git history."""
    dest = tmp_path_factory.mktemp("release-1")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE, "memstore"], capture_output=True
    )
    assert archive.returncode == 0, (
        f"commit {PREVIOUS_RELEASE} (the previous release) is not in this clone: "
        f"{archive.stderr.decode()[-300:]} (a shallow clone? git fetch --unshallow)"
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def old_ct(old_code, *args):
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    # cwd is the old code too: `python -m` puts the working folder ahead of PYTHONPATH
    proc = subprocess.run(
        [sys.executable, "-m", "memstore", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=old_code,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def build_format1(old_code, tmp_path) -> Path:
    """~50 records by the old release: 40 turns over four days (tree.json), three documents, one blob."""
    root = tmp_path / "store"
    old_ct(old_code, "init", root, "--embedder", "hash", "--timezone", "Europe/Berlin")
    words = [
        "trip budget 2,400 euros",
        "water the ficus on Fridays",
        "release on Thursday after tests",
        "night train tickets open Friday",
        "car insurance 555 a year",
        "marathon long run Sunday",
        "tram 28 old town early",
        "groceries 420 euros in December",
        "dentist moved to the 14th",
        "passports valid for the stay",
    ]
    turns = tmp_path / "turns.jsonl"
    with turns.open("w") as fh:
        for i in range(40):
            fh.write(
                json.dumps(
                    {
                        "ts": f"2026-11-{20 + i // 10:02d}T{8 + i % 10:02d}:15:00+01:00",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "session": f"s{i // 10}",
                        "text": f"Turn {i}: about {words[i % 10]}.",
                    }
                )
                + "\n"
            )
    old_ct(old_code, "-C", root, "import", "jsonl", turns)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "budget.md").write_text(
        "# Household budget\n\nThe household budget is 1,650 euros. Review on the tenth.\n"
    )
    (docs / "trip.md").write_text(
        "# Lisbon\n\nFlights 400, the flat in Alfama for five nights, tram 28.\n"
    )
    (docs / "release.txt").write_text(
        "Releases happen on Thursdays only. A failing test blocks the release.\n"
    )
    old_ct(old_code, "-C", root, "ingest-path", docs)
    media = tmp_path / "media"
    media.mkdir()
    (media / "ficus.bin").write_bytes(bytes(range(256)) * 64)
    (media / "notes.md").write_text("# Yoga\n\nYoga on Tuesday evenings; pack the charger.\n")
    old_ct(old_code, "-C", root, "ingest-any", media)
    assert (root / "tree.json").is_file() and (root / "segments").is_dir()
    return root


def records(root: Path) -> list[dict]:
    out = []
    for p in sorted((root / "log").rglob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines()]
    return out


def searches(root: Path, tmp_path: Path, mode: str) -> list[list[dict]]:
    qfile = tmp_path / "queries.txt"
    qfile.write_text("\n".join(QUERIES) + "\n")
    out = ct("-C", root, "search", "--mode", mode, "-k", "8", "--queries", qfile).stdout
    hits = [json.loads(line)["hits"] for line in out.splitlines()]
    for row in hits:  # the one field an upgrade changes on purpose
        for h in row:
            if isinstance(h.get("source"), dict):
                h["source"].pop("blob", None)
    return hits


def vectors_before(root: Path) -> dict[str, tuple]:
    from memstore.format.stored import seg_vector

    out = {}
    for rec in records(root):
        h, payload = seg_vector(root, rec)
        out[rec["id"]] = (h.data_type, h.dim, h.scale, h.unix_time, payload)
    return out


def vectors_after(root: Path) -> dict[str, tuple]:
    from memstore.format import log as logfmt
    from memstore.format.stored import day_encoded

    out = {}
    for day in logfmt.list_days(root):
        for rid, (h16, h, payload) in day_encoded(root, day).items():
            out[rid] = (h.data_type, h.dim, h.scale, h.unix_time, payload)
    return out


def test_upgrade_keeps_records_vectors_tree_and_search_results(old_code, tmp_path):
    from memstore.format import tree as treefmt

    root = build_format1(old_code, tmp_path)
    before_recs = records(root)
    assert 45 <= len(before_recs) <= 60
    before_vecs = vectors_before(root)
    before_tree = treefmt.read_file(root / "tree.json").to_json()
    before = {m: searches(root, tmp_path, m) for m in ("hybrid", "vector", "exact")}
    assert all(len(rows) == 20 for rows in before.values())
    assert all(before["vector"]) and sum(map(bool, before["exact"])) >= 15
    n_commits = len(commits(root))

    plan = ct("-C", root, "upgrade", "-n").stdout
    assert "would rewrite" in plan and "would remove segments/" in plan
    assert git_clean(root) and len(commits(root)) == n_commits

    res = json.loads(ct("-C", root, "upgrade", "--json").stdout)
    assert (
        res["commit"] and res["records"] == len(before_recs) and res["vectors"] == len(before_recs)
    )
    assert res["blobs"] == 1
    assert len(commits(root)) == n_commits + 1 and commits(root)[0].startswith(
        "Upgrade store to format 3"
    )
    assert git_clean(root)
    assert "format_version = 3" in (root / "memstore.toml").read_text()
    assert not (root / "segments").exists() and not (root / "tree.json").exists()
    assert list((root / "tree").rglob("*.jsonl"))  # the tree op log
    attrs = (root / ".gitattributes").read_text()
    assert "merge=memstore-tree" not in attrs and "log/**/*.jsonl merge=union" in attrs

    # records: the same, less seg, plus each one's key; the blob reference names the original by content
    after_recs = records(root)
    assert len(after_recs) == len(before_recs)
    assert len({new.pop("vkey") for new in after_recs}) == len(
        after_recs
    )  # one random key per record
    for old, new in zip(before_recs, after_recs):
        assert "seg" not in new
        old = {k: v for k, v in old.items() if k != "seg"}
        blob = (old.get("source") or {}).get("blob")
        if blob:
            assert (
                set(new["source"]["blob"]) == {"sha256", "bytes"}
                and new["source"]["blob"]["bytes"] == 256 * 64
            )
            old["source"] = {**old["source"], "blob": new["source"]["blob"]}
        assert new == old

    assert vectors_after(root) == before_vecs  # every vector bit for bit, with its header fields
    assert treefmt.read(root).to_json() == before_tree
    for mode, rows in before.items():
        assert searches(root, tmp_path, mode) == rows, mode  # ids, order, scores, texts
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]

    again = ct("-C", root, "upgrade").stdout
    assert "already format 3" in again and len(commits(root)) == n_commits + 1


def test_a_damaged_format1_store_is_refused_untouched(old_code, tmp_path):
    root = tmp_path / "store"
    old_ct(old_code, "init", root, "--embedder", "hash", "--timezone", "UTC")
    old_ct(old_code, "-C", root, "add", "the ficus needs water")
    seg = sorted((root / "segments").rglob("segment_1.is"))[0]
    seg.write_bytes(seg.read_bytes()[:-3])
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "damage"], check=True)
    proc = ct("-C", root, "upgrade", check=False)
    assert proc.returncode == 4 and "its vector segment cannot be read" in proc.stderr
    assert "format_version = 1" in (root / "memstore.toml").read_text() and git_clean(root)

    (root / "stray.txt").write_text("x")
    proc = ct("-C", root, "upgrade", check=False)
    assert proc.returncode == 1 and "uncommitted changes (stray.txt)" in proc.stderr


def test_an_upgrade_killed_before_its_commit_is_undone_by_the_next(old_code, tmp_path):
    root = tmp_path / "store"
    old_ct(old_code, "init", root, "--embedder", "hash", "--timezone", "UTC")
    old_ct(old_code, "-C", root, "add", "the ficus needs water")
    before = records(root)
    # what a killed upgrade leaves: its marker, a rewritten log, a pack, segments/ gone, the config switched
    (root / ".memstore" / "upgrade-in-progress").write_text("12345")
    log = next((root / "log").rglob("*.jsonl"))
    log.write_text(json.dumps({k: v for k, v in before[0].items() if k != "seg"}) + "\n")
    (root / "packs" / "2026").mkdir(parents=True)
    (root / "packs" / "2026" / "x.is").write_bytes(b"partial")
    subprocess.run(["rm", "-rf", str(root / "segments")], check=True)
    (root / "memstore.toml").write_text(
        (root / "memstore.toml").read_text().replace("format_version = 1", "format_version = 2")
    )

    plan = ct(
        "-C", root, "upgrade", "-n"
    ).stdout  # puts the committed format-1 store back, then plans
    assert "would rewrite 1 day logs" in plan
    assert (
        git_clean(root)
        and records(root) == before
        and not (root / ".memstore" / "upgrade-in-progress").exists()
    )
    ct("-C", root, "upgrade")
    assert [{k: v for k, v in r.items() if k != "vkey"} for r in records(root)] == [
        {k: v for k, v in r.items() if k != "seg"} for r in before
    ]
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]


LAST_FORMAT_2 = "e08e6df"  # the last commit that wrote format 2


@pytest.fixture(scope="module")
def format2_code(tmp_path_factory):
    dest = tmp_path_factory.mktemp("format-2")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", LAST_FORMAT_2, "memstore"], capture_output=True
    )
    assert archive.returncode == 0, (
        f"commit {LAST_FORMAT_2} is not in this clone: {archive.stderr.decode()[-300:]}"
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def test_a_format_2_store_is_upgraded_to_format_3_in_one_commit(format2_code, tmp_path):
    """Every record gains a key (nothing else in its line changes), every vector is sealed bit for
    bit, search ranks the same, and the store is written to again; before it, writes exit 5."""
    root = tmp_path / "store"
    old_ct(format2_code, "init", root, "--embedder", "hash", "--timezone", "UTC")
    for k, text in enumerate(
        ["the ficus needs water", "book the night train", "trip budget is 2400", "call mum"]
    ):
        old_ct(format2_code, "-C", root, "add", "--ts", f"2026-03-0{1 + k % 2}T10:0{k}:00Z", text)
    old_ct(format2_code, "-C", root, "forget", "--match", "call mum")
    before_recs, before_vecs = records(root), vectors_after(root)
    before = searches(root, tmp_path, "vector")
    proc = ct("-C", root, "add", "not yet", check=False)
    assert proc.returncode == 5 and 'this store is format 2; run "ct upgrade"' in proc.stderr
    n = len(commits(root))
    res = json.loads(ct("-C", root, "upgrade", "--json").stdout)
    assert res["from_format"] == 2 and res["records"] == 3 and res["vectors"] == 3
    assert len(commits(root)) == n + 1 and commits(root)[0].startswith("Upgrade store to format 3")
    assert "format_version = 3" in (root / "memstore.toml").read_text() and git_clean(root)
    after = records(root)
    assert [{k: v for k, v in r.items() if k != "vkey"} for r in after] == before_recs
    assert all(len(r["vkey"]) == 43 for r in after)
    assert (
        vectors_after(root) == before_vecs
    )  # every vector bit for bit, opened with its line's key
    assert searches(root, tmp_path, "vector") == before
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]
    ct("-C", root, "add", "--ts", "2026-03-01T11:00:00Z", "written after the upgrade")
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["records"] == 4
    assert "already format 3" in ct("-C", root, "upgrade").stdout
