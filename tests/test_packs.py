"""Store format 2: packs on the write and read paths, consolidation (`ct gc`), pack integrity, and format 1 kept readable."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

from conftest import commits, ct, git_clean, make_store, write_turns

from memstore.format import pack as packfmt


def git(root, *args, check=True):
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=check
    )


def _packs(root, day="2026-11-30"):
    return packfmt.pack_files(packfmt.day_dir(root, day))


def _ids(root) -> list[str]:
    out = []
    for p in sorted((root / "log").rglob("*.jsonl")):
        out += [json.loads(x)["id"] for x in p.read_text().splitlines()]
    return out


# ----- writing ------------------------------------------------------------------------------------


def test_one_write_makes_one_pack_per_day_it_touches(store):
    res = write_turns(
        store,
        [
            ("2026-11-29T10:00:00Z", "user", "a note on the 29th", "s", None),
            ("2026-11-30T10:00:00Z", "user", "a note on the 30th", "s", None),
            ("2026-11-30T11:00:00Z", "assistant", "a reply on the 30th", "s", None),
        ],
    )
    assert len(_packs(store.root, "2026-11-29")) == 1 and len(_packs(store.root, "2026-11-30")) == 1
    vecs = packfmt.day_vectors(store.root, "2026-11-30")
    for rec in res.added[1:]:
        vec, h16 = vecs[rec["id"]]
        assert h16 == rec["hash"][:16] and vec.shape == (384,)
        np.testing.assert_array_equal(vec, store.embedder.embed_batch([rec["text"]])[0])
    changed = git(store.root, "show", "--name-only", "--format=", "HEAD").stdout.split()
    assert sorted(p.split("/")[0] for p in changed if not p.startswith("tree")) == [
        "log",
        "log",
        "packs",
        "packs",
    ]
    assert git_clean(store.root)


def test_a_day_with_many_packs_is_consolidated_by_the_next_write(store):
    for k in range(8):
        store.add(f"turn number {k} about the river", ts=f"2026-11-30T0{k}:00:00Z")
    assert len(_packs(store.root)) == 8
    store.add("the ninth turn", ts="2026-11-30T09:00:00Z")
    (pack,) = _packs(store.root)
    assert sorted(packfmt.day_vectors(store.root, "2026-11-30")) == sorted(_ids(store.root))
    packfmt.read(pack, verify=True)
    assert git_clean(store.root) and commits(store.root)[0].startswith(
        "Add user turn: the ninth turn"
    )
    assert store.fsck().ok and not store.fsck().warnings
    hits = store.search("turn number 3 river", mode="vector", k=1)
    assert hits[0].text == "turn number 3 about the river"


def test_the_consolidation_threshold_is_a_setting(store):
    toml = store.root / "memstore.toml"
    toml.write_text(toml.read_text().replace("consolidate_packs = 8", "consolidate_packs = 2"))
    git(store.root, "commit", "-qam", "threshold 2")
    from memstore.store import Store

    st = Store.open(store.root)
    for k in range(3):
        st.add(f"turn {k}", ts=f"2026-11-30T0{k}:00:00Z")
    assert len(_packs(store.root)) == 1


# ----- gc -------------------------------------------------------------------------------------------


def test_gc_consolidates_every_day_in_one_commit(store):
    for day in ("28", "29", "30"):
        for k in range(3):
            store.add(f"day {day} turn {k}", ts=f"2026-11-{day}T0{k}:00:00Z")
    store.add("a lone turn", ts="2026-11-27T08:00:00Z")
    n = len(commits(store.root))
    plan = json.loads(ct("-C", store.root, "gc", "-n", "--json").stdout)
    assert plan["days"] == ["2026-11-28", "2026-11-29", "2026-11-30"] and plan["packs_before"] == 9
    assert len(commits(store.root)) == n
    out = ct("-C", store.root, "gc")
    assert "Consolidated 9 packs into 3 for 3 days" in out.stdout
    assert (
        commits(store.root)[0] == "Consolidate 9 packs into 3 for 3 days"
        and len(commits(store.root)) == n + 1
    )
    assert all(len(_packs(store.root, f"2026-11-{d}")) == 1 for d in ("27", "28", "29", "30"))
    assert git_clean(store.root) and ct("-C", store.root, "fsck").returncode == 0
    assert (
        "Nothing to consolidate" in ct("-C", store.root, "gc").stdout
        and len(commits(store.root)) == n + 1
    )
    hits = json.loads(
        ct("-C", store.root, "search", "day 29 turn 2", "--mode", "vector", "--json").stdout
    )["hits"]
    assert hits[0]["text"] == "day 29 turn 2"


def _clone_pair(tmp_path, adds: int):
    a = make_store(tmp_path / "a").root
    for k in range(adds):
        ct("-C", a, "add", f"shared turn {k} about kyoto trains", "--ts", f"2026-11-30T0{k}:00:00Z")
    git(tmp_path, "clone", "-q", str(a), str(tmp_path / "b"))
    return a, tmp_path / "b"


def _merge_clean(into, other):
    merged = git(into, "pull", "--no-rebase", "--no-edit", str(other), "main", check=False)
    out = merged.stdout + merged.stderr
    assert merged.returncode == 0 and "CONFLICT" not in out, out


def test_two_clones_consolidating_the_same_day_merge_and_gc_drops_the_repeat(tmp_path):
    """Every pack has its own nonce, so two consolidations of the same packs are two files; both
    stay after a merge (readers take one copy) and the next gc merges the repeats into one."""
    a, b = _clone_pair(tmp_path, 3)
    for root in (a, b):
        ct("-C", root, "gc")
    assert len(_packs(a)) == 1 and [p.name for p in _packs(a)] != [p.name for p in _packs(b)]
    ct("-C", b, "add", "only on b", "--ts", "2026-11-30T11:00:00Z")
    _merge_clean(a, b)
    assert ct("-C", a, "fsck").returncode == 0 and git_clean(a) and len(_packs(a)) == 3
    assert json.loads(ct("-C", a, "stat", "--json").stdout)["records"] == 4
    ct("-C", a, "gc")
    assert len(_packs(a)) == 1 and sorted(packfmt.day_vectors(a, "2026-11-30")) == sorted(_ids(a))


def test_two_clones_consolidating_differently_merge_with_plain_git(tmp_path):
    a, b = _clone_pair(tmp_path, 3)
    ct("-C", a, "add", "only on a: hotel in osaka", "--ts", "2026-11-30T10:00:00Z")
    ct("-C", b, "add", "only on b: ferry to naoshima", "--ts", "2026-11-30T11:00:00Z")
    for root in (a, b):
        assert "Consolidated 4 packs into 1 for 1 day" in ct("-C", root, "gc").stdout
    _merge_clean(a, b)
    assert len(_packs(a)) == 2  # each holds the three shared records: duplicates across packs
    rep = json.loads(ct("-C", a, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [] and rep["records"] == 5
    for needle in ("hotel in osaka", "ferry to naoshima", "shared turn 1 about kyoto trains"):
        hits = json.loads(ct("-C", a, "search", needle, "--mode", "vector", "--json").stdout)[
            "hits"
        ]
        assert hits[0]["text"].endswith(needle)
    texts = [
        h["text"]
        for h in json.loads(
            ct("-C", a, "search", "kyoto trains", "--mode", "vector", "-k", "10", "--json").stdout
        )["hits"]
    ]
    assert len(texts) == len(set(texts)) == 5  # a record in two packs is found once
    _merge_clean(b, a)
    assert git(a, "rev-parse", "HEAD^{tree}").stdout == git(b, "rev-parse", "HEAD^{tree}").stdout
    assert git_clean(a) and git_clean(b)


def test_a_big_pack_is_never_rewritten_for_small_additions(tmp_path):
    """Merging a big pack into a slightly bigger one would look like a rename to git's merge, and two
    clones' different "renames" of the same pack conflict; so small packs merge among themselves."""
    a = make_store(tmp_path / "a").root
    for k in range(6):
        ct("-C", a, "add", f"shared turn {k}", "--ts", f"2026-11-30T0{k}:00:00Z")
    ct("-C", a, "gc")
    (big,) = _packs(a)
    git(tmp_path, "clone", "-q", str(a), str(tmp_path / "b"))
    b = tmp_path / "b"
    for root, who in ((a, "a"), (b, "b")):
        for k in range(3):
            ct("-C", root, "add", f"{who} turn {k}", "--ts", f"2026-11-30T1{k}:00:00Z")
        assert "Consolidated 3 packs into 1 for 1 day" in ct("-C", root, "gc").stdout
        assert big.name in [p.name for p in _packs(root)] and len(_packs(root)) == 2
    _merge_clean(a, b)
    _merge_clean(b, a)
    rep = json.loads(ct("-C", a, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [] and rep["records"] == 12 and len(_packs(a)) == 3


# ----- integrity --------------------------------------------------------------------------------------


def test_flipping_any_byte_of_a_pack_is_found_and_named(tmp_path):
    from memstore.upkeep.fsck import fsck
    from memstore.store import Store

    st = Store.init(
        tmp_path / "small", embedder="hash", timezone="UTC", embedder_options={"dim": 8}
    )
    st.add("a small record", ts="2026-11-30T08:00:00Z")
    (pack,) = _packs(st.root)
    good = pack.read_bytes()
    manifest_end = 32 + packfmt.parse(good).segments[0][0].data_len
    assert len(good) < 400 and manifest_end < len(good)
    assert fsck(st).ok
    missed = []
    for i in range(len(good)):  # header, manifest and payload bytes alike
        data = bytearray(good)
        data[i] ^= 0x01 if i % 2 else 0xFF
        pack.write_bytes(bytes(data))
        rep = fsck(st)
        if rep.ok or not any(pack.name in d for d in rep.damage):
            missed.append(i)
    assert missed == []
    for i in (3, 40, manifest_end + 5, len(good) - 1):  # the CLI: exit 1 naming the pack
        data = bytearray(good)
        data[i] ^= 0x10
        pack.write_bytes(bytes(data))
        proc = ct("-C", st.root, "fsck", check=False)
        assert proc.returncode == 1 and pack.name in proc.stdout, (i, proc.stdout)
    pack.write_bytes(good)
    assert ct("-C", st.root, "fsck").returncode == 0


def test_fsck_names_a_missing_vector_an_orphan_and_temp_files(store):
    store.add("kept", ts="2026-11-30T08:00:00Z")
    w = packfmt.PackWriter("2026-11-30", 384)
    w.add_vector("nobody-1", bytes(32), "ab" * 32, np.ones(384, np.float32), "float32", 0)
    orphan = w.write(store.root)  # sealed under a key no line holds: nothing can open or name it
    (orphan.parent / ".tmpname.is.tmp-77").write_bytes(b"x")
    rep = store.fsck()
    assert rep.ok
    assert any("temp file left by an interrupted write" in x for x in rep.warnings)
    for p in _packs(store.root):
        if p != orphan:
            p.unlink()
    rep = store.fsck()
    assert not rep.ok and any("has no vector in packs/2026/2026-11-30/" in d for d in rep.damage)


def test_a_killed_consolidation_is_rolled_back(store):
    for k in range(3):
        store.add(f"turn {k}", ts=f"2026-11-30T0{k}:00:00Z")
    before = sorted(p.name for p in _packs(store.root))
    head = git(store.root, "rev-parse", "HEAD").stdout
    # What `ct gc` killed between writing the new pack (and deleting the old ones) and committing leaves:
    (store.meta_dir / "write-journal.json").write_text(
        json.dumps({"pid": 999999, "started": time.time() - 5})
    )
    from memstore.core import day_ring

    new, old = packfmt.consolidate(
        store.root, "2026-11-30", 384, day_ring(store.root, "2026-11-30")
    )
    for p in old:
        p.unlink()
    proc = ct("-C", store.root, "search", "turn 1", "--json")
    assert json.loads(proc.stdout)["hits"]
    assert sorted(p.name for p in _packs(store.root)) == before
    assert git(store.root, "rev-parse", "HEAD").stdout == head and git_clean(store.root)
    assert store.fsck().ok


def test_an_uncommitted_pack_a_committed_record_needs_is_left_alone(store):
    store.add("first", ts="2026-11-30T08:00:00Z")
    (pack,) = _packs(store.root)
    git(store.root, "rm", "-q", "--cached", str(pack))
    git(store.root, "commit", "-qm", "forgot the pack")
    from memstore.repair import repair

    rep = repair(store)
    assert pack.exists() and any("git add it" in u for u in rep.untouched)


# ----- reembed ----------------------------------------------------------------------------------------


def test_reembed_writes_one_new_pack_per_day_in_one_commit(store):
    write_turns(
        store,
        [
            ("2026-11-29T10:00:00Z", "user", "one", "s", None),
            ("2026-11-30T10:00:00Z", "user", "two", "s", None),
        ],
    )
    store.add("three", ts="2026-11-30T11:00:00Z")
    n = len(commits(store.root))
    ct("-C", store.root, "reembed", "--embedder", "hash", "--dim", "64")
    assert len(commits(store.root)) == n + 1 and commits(store.root)[0].startswith(
        "Re-embed 3 records with"
    )
    assert commits(store.root)[0].endswith("(64-d)")
    assert len(_packs(store.root, "2026-11-29")) == 1 and len(_packs(store.root, "2026-11-30")) == 1
    for day in ("2026-11-29", "2026-11-30"):
        assert all(v.shape == (64,) for v, _ in packfmt.day_vectors(store.root, day).values())
    assert git_clean(store.root) and ct("-C", store.root, "fsck").returncode == 0
    hits = json.loads(ct("-C", store.root, "search", "three", "--mode", "vector", "--json").stdout)[
        "hits"
    ]
    assert hits[0]["text"] == "three"


# ----- format 1: still read, never written --------------------------------------------------------------


def format1_store(path):
    """A store as format 1 wrote it: `seg` in every record, a text/vector segment pair per record."""
    from memstore.format import log as logfmt
    from memstore.format import record as recordfmt
    from memstore.format.segment import ShardWriter
    from memstore.format.timeutil import from_iso, zone

    st = make_store(path)
    shard = st.root / "segments/2026/2026-11-30/w0000beef"
    sw = ShardWriter(shard)
    texts = ["the budget is forty thousand", "we take the night train to vienna", "buy oat milk"]
    recs = []
    for k, text in enumerate(texts):
        rec = recordfmt.normalize(
            {"ts": f"2026-11-30T0{k}:00:00Z", "role": "user", "text": text}, zone("UTC")
        )
        rec["hash"] = recordfmt.text_hash(text)
        vec = st.embedder.embed_batch([text])[0]
        tid, vid = sw.write_pair(
            text, vec, "float32", int(from_iso(rec["ts"]).timestamp()), fsync=False
        )
        rec["seg"] = {"shard": "segments/2026/2026-11-30/w0000beef", "text": tid, "vec": vid}
        recs.append(rec)
    logfmt.append(logfmt.day_path(st.root, "2026-11-30"), recs, fsync=False)
    toml = st.root / "memstore.toml"
    toml.write_text(toml.read_text().replace("format_version = 3", "format_version = 1"))
    git(st.root, "add", "-A")
    git(st.root, "commit", "-qm", "a format-1 store")
    return st.root


def test_a_format_1_store_is_read_and_searched_as_before(tmp_path):
    root = format1_store(tmp_path / "old")
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["records"] == 3 and rep["segments"] == 6 and rep["warnings"] == []
    hits = json.loads(
        ct("-C", root, "search", "night train to vienna", "--mode", "vector", "--json").stdout
    )["hits"]
    assert hits[0]["text"] == "we take the night train to vienna"
    assert json.loads(ct("-C", root, "stat", "--json").stdout)["format_version"] == 1
    assert git_clean(root)


@pytest.mark.parametrize(
    "args",
    [
        ["add", "more"],
        ["mark", "a marker"],
        ["gc"],
        ["reembed"],
        ["tree", "--place-existing"],
        ["reorganize"],
    ],
)
def test_every_write_on_a_format_1_store_names_ct_upgrade(tmp_path, args):
    root = format1_store(tmp_path / "old")
    head = git(root, "rev-parse", "HEAD").stdout
    proc = ct("-C", root, *args, check=False)
    assert proc.returncode == 5, proc.stderr
    assert 'this store is format 1; run "ct upgrade" (one commit)' in proc.stderr
    assert git(root, "rev-parse", "HEAD").stdout == head and git_clean(root)
    assert not (root / "packs").exists()
