"""Store format 3: packs are sealed, never rewritten by a forget, and unique byte for byte, so plain
`git pull` (merge or rebase) never stops on memstore's own files (issue 27, item 1).

Each flow runs on the hash embedder and on the default MiniLM embedder (whose packs git paired as
renames, 78% similar, when a forget rewrote them).
"""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from conftest import ct, git_clean, make_store, needs_minilm_weights

DAY = "2026-03-02"
EMBEDDERS = ["hash", pytest.param("minilm", marks=needs_minilm_weights)]
PULLS = ["--no-rebase", "--rebase"]


def git(root, *args, check=True):
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stdout}{proc.stderr}")
    return proc


def _clone(origin, path):
    subprocess.run(["git", "clone", "-q", str(origin), str(path)], check=True)
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    return path


def _pair(tmp_path, embedder: str, adds: int):
    """(a, b): two plain clones of one origin holding, on DAY, one write of five records (one pack,
    which a format-2 forget rewrote) and then `adds` one-record writes (a pack each)."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    st = make_store(tmp_path / "a", embedder=embedder)
    a = st.root
    # the clones' identity (_clone): one person on two machines, so an import there writes the
    # same `author` and the same lines (docs/format.md, "Authors")
    git(a, "config", "user.email", "t@example.org")
    git(a, "config", "user.name", "t")
    git(a, "remote", "add", "origin", str(origin))
    batch = [
        st.normalize(
            {
                "ts": f"{DAY}T09:0{k}:00Z",
                "role": "user",
                "session": "s",
                "text": f"batch turn {k}: the ferry to the island leaves at {k}",
            }
        )
        for k in range(5)
    ]
    ids = [r["id"] for r in st.write(batch, "Add 5 turns").added]
    ids += [
        _add(a, f"turn {k}: the night train to vienna leaves at {k} o'clock", k)
        for k in range(adds)
    ]
    git(a, "push", "-q", "-u", "origin", "main")
    return a, _clone(origin, tmp_path / "b"), ids


def _add(root, text: str, minute: int) -> str:
    out = ct(
        "-C", root, "add", "--session", "s", "--ts", f"{DAY}T10:{minute:02d}:00Z", text, "--json"
    ).stdout
    return json.loads(out)["ids"][0]


def _pull(root, mode: str):
    """A plain `git pull` (no ct): it must finish on its own, with no conflict."""
    proc = git(root, "pull", mode, "--no-edit", "origin", "main", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "CONFLICT" not in out, out
    assert git_clean(root)


def _records(root) -> int:
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["damage"] == [], rep
    return rep["records"]


def _packs(root) -> list:
    return sorted((root / "packs").rglob("*.is"))


@pytest.mark.parametrize("mode", PULLS)
@pytest.mark.parametrize("embedder", EMBEDDERS)
def test_two_clones_forget_different_records_of_one_day_and_pull(tmp_path, embedder, mode):
    a, b, ids = _pair(tmp_path, embedder, 0)
    ct("-C", a, "forget", ids[0])
    git(a, "push", "-q", "origin", "main")
    ct("-C", b, "forget", ids[4])
    _pull(b, mode)
    # Each forget named the topic again from what its clone held, so each side's summary line
    # quotes the record the other side forgot; the merge keeps both, replay shows one. The other
    # is damage fsck names (a plain clone has no post-merge hook), and --repair removes it.
    rep = json.loads(ct("-C", b, "fsck", "--json", check=False).stdout)
    assert all("an earlier summary of it" in d for d in rep["damage"]), rep
    if rep["damage"]:
        ct("-C", b, "fsck", "--repair")
    assert _records(b) == 3
    texts = [f"batch turn {k}: the ferry" for k in (0, 4)]
    tracked = git(b, "ls-files").stdout.split()
    assert not [(p, t) for p in tracked for t in texts if t.encode() in (b / p).read_bytes()]
    hits = json.loads(ct("-C", b, "search", "ferry island", "--json").stdout)["hits"]
    assert sorted(h["id"] for h in hits) == sorted(ids[1:4])


@pytest.mark.parametrize("mode", PULLS)
@pytest.mark.parametrize("embedder", EMBEDDERS)
def test_a_forget_on_one_clone_and_a_consolidating_write_on_the_other_pull(
    tmp_path, embedder, mode
):
    a, b, ids = _pair(tmp_path, embedder, 7)
    ct("-C", a, "forget", ids[3])
    git(a, "push", "-q", "origin", "main")
    before = set(_packs(b))
    new = _add(b, "the ninth turn: it consolidates the day", 30)
    assert len(_packs(b)) < len(before)  # the write consolidated the day's packs
    _pull(b, mode)
    assert _records(b) == 12
    git(b, "push", "-q", "origin", "main")
    _pull(a, mode)  # and the other way round
    assert _records(a) == 12
    assert new in ct("-C", a, "search", "ninth turn consolidates", "--json").stdout


@pytest.mark.parametrize("mode", PULLS)
@pytest.mark.parametrize("embedder", EMBEDDERS)
def test_two_clones_consolidating_different_sets_of_a_day_pull_and_sync(tmp_path, embedder, mode):
    a, b, _ids = _pair(tmp_path, embedder, 7)
    _add(a, "written on a, consolidating", 40)
    _add(b, "written on b, consolidating too", 41)
    ct("-C", b, "forget", _ids[5])
    git(a, "push", "-q", "origin", "main")
    _pull(b, mode)
    assert _records(b) == 13
    git(b, "push", "-q", "origin", "main")
    ct("-C", a, "add", "--ts", f"{DAY}T11:00:00Z", "one more on a")  # and ct sync merges it too
    ct("-C", a, "sync")
    assert _records(a) == 14 and git_clean(a)
    ct("-C", a, "gc")
    assert _records(a) == 14


def _opened(root) -> dict:
    """Every vector any key-like string of the work tree opens in any pack: {vector bytes: count}."""
    from memstore.format import pack as packfmt
    from memstore.format import seal

    keys = set()
    for path in root.rglob("*"):
        if ".git" in path.parts or ".memstore" in path.parts or not path.is_file():
            continue
        for token in re.findall(rb"[A-Za-z0-9_-]{43}", path.read_bytes()):
            key = seal.key_bytes(token.decode())
            if key is not None:
                keys.add(key)
    out: dict = {}
    for p in _packs(root):
        pk = packfmt.read(p, verify=True)
        for it in pk.items([("?", k) for k in keys]):
            out[it.payload] = out.get(it.payload, 0) + 1
    return out


def test_a_forget_rewrites_no_pack_and_leaves_the_vector_unreadable(tmp_path):
    from memstore.format import pack as packfmt

    st = make_store(tmp_path / "s")
    for k, text in enumerate(["the locker code is 4471", "water the ferns", "call the plumber"]):
        st.add(text, ts=f"{DAY}T10:0{k}:00Z")
    vectors = packfmt.day_vectors(st.root, DAY)
    lines = [json.loads(x) for x in (st.root / f"log/2026/{DAY}.jsonl").read_text().splitlines()]
    rid = next(r["id"] for r in lines if r["text"].startswith("the locker"))
    secret = np.asarray(vectors[rid][0], "<f4").tobytes()
    assert secret in _opened(st.root)  # its line's key opens it
    packs = [p.read_bytes() for p in _packs(st.root)]
    ct("-C", st.root, "forget", rid)
    assert [p.read_bytes() for p in _packs(st.root)] == packs  # no pack rewritten
    assert "packs/" not in git(st.root, "show", "--name-only", "--format=", "HEAD").stdout
    opened = _opened(st.root)
    assert secret not in opened and len(opened) == 2  # the other two still open with their keys
    assert secret not in b"".join(packs)  # and the pack never held it in the clear


def test_every_pack_is_unique_and_holds_nothing_in_the_clear(tmp_path):
    """Two packs of the same record share no 64-byte run (what git's rename detection counts),
    and no record id, text hash or vector byte run is in a pack as written."""
    from memstore.format import pack as packfmt

    st = make_store(tmp_path / "s")
    st.add("a lonely record", ts=f"{DAY}T10:00:00Z")
    (p,) = _packs(st.root)
    line = json.loads((st.root / f"log/2026/{DAY}.jsonl").read_text())
    keys = packfmt.ring([line])
    w = packfmt.merged_writer(DAY, 384, [p], keys)  # the same content, consolidated again
    again = w.to_bytes()
    data = p.read_bytes()
    chunks = {data[i : i + 64] for i in range(0, len(data), 64)}
    assert not any(again[i : i + 64] in chunks for i in range(0, len(again), 64))
    assert line["id"].encode() not in data and line["hash"][:16].encode() not in data
    vec = packfmt.day_vectors(st.root, DAY)[line["id"]][0]
    assert np.asarray(vec, "<f4").tobytes()[:32] not in data


def test_two_clones_importing_the_same_file_write_the_same_lines_and_a_merge_keeps_one(tmp_path):
    """A record's key is made from its id and text, so the same import on two clones writes identical
    lines: union merge keeps each once (a random key gave two differing lines with one id)."""
    a, b, _ids = _pair(tmp_path, "hash", 0)
    turns = tmp_path / "turns.jsonl"
    rows = [
        {"ts": f"{DAY}T1{k}:00:00Z", "role": "user", "session": "imp", "text": f"imported turn {k}"}
        for k in range(3)
    ]
    turns.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for root in (a, b):
        ct("-C", root, "import", "jsonl", turns)
    git(a, "push", "-q")
    git(b, "pull", "-q", "--no-rebase", "--no-edit")
    lines = (b / "log" / DAY[:4] / f"{DAY}.jsonl").read_text().splitlines()
    ids = [json.loads(ln)["id"] for ln in lines]
    assert len(ids) == len(set(ids)), "a merge kept two lines of one record"
    rep = json.loads(ct("-C", b, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
