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


def _zlib_levels(root) -> dict[str, tuple[bytes, float]]:
    """{path at HEAD: (the 2-byte zlib header of its blob's entry in a git pack, bytes in the pack
    over bytes of the file)}; the header is 0x78 0x01 for zlib levels 0-1, 0x78 0x9c for git's
    default."""
    run = lambda *a: (
        subprocess.run(  # noqa: E731
            ["git", "-C", str(root), *a], capture_output=True, text=True, check=True
        ).stdout
    )
    blob_of = {}
    for line in run("ls-tree", "-r", "HEAD").splitlines():
        meta, path = line.split("\t", 1)
        blob_of[meta.split()[2]] = path
    out = {}
    pack_dir = root / ".git" / "objects" / "pack"
    for idx in pack_dir.glob("*.idx"):
        data = (idx.with_suffix(".pack")).read_bytes()
        for line in run("verify-pack", "-v", str(idx)).splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[0] in blob_of and parts[1] == "blob":
                at = int(parts[4])
                while data[at] & 0x80:  # the entry's type-and-size header
                    at += 1
                out[blob_of[parts[0]]] = (data[at + 1 : at + 3], int(parts[3]) / int(parts[2]))
    return out


def test_a_big_write_stores_its_packs_ciphertext_uncompressed_and_its_logs_compressed(store):
    rows = _turns(130, 2)
    store.write([store.normalize(r) for r in rows], "Import 260 turns")
    levels = _zlib_levels(store.root)
    packs = {p: h for p, h in levels.items() if p.startswith("packs/")}
    logs = {p: h for p, h in levels.items() if p.startswith("log/")}
    assert len(packs) >= 130 and len(logs) >= 130  # both went into git packs, not loose files
    # sealed bytes: zlib's "stored" level, nothing to gain; text: zlib's fastest level, compressed
    assert {h for h, _ in packs.values()} == {b"\x78\x01"}
    assert all(r >= 1.0 for _, r in packs.values())
    assert {h for h, _ in logs.values()} == {b"\x78\x01"} and all(r < 0.7 for _, r in logs.values())
