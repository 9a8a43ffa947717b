"""`ct forget` (issue 13): a record in a topic summary, pushed and pulled by a second clone, is gone
from every file of both after sync; git history holds it until --purge-history and never after;
search, context, tree and where never show it; a stale third clone's merge does not revive it."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import commits, ct, git_clean, make_store

TEXT = "The surprise party for Dana is at the old boathouse on Friday night"
WORDS = "surprise party Dana boathouse"


def git(root, *args, check=True):
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=check
    ).stdout


def in_history(root, text=TEXT) -> bool:
    return text in git(root, "log", "-p", "--all", "-S", text) or text[:40] in git(
        root, "log", "--all", "--format=%B"
    )


def in_files(root, text=TEXT) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and ".git" not in p.parts and ".memstore" not in p.parts:
            data = p.read_bytes()
            if (
                text.encode() in data
                or json.dumps(text)[1:-1].encode() in data
                or text[:24].encode() in data
            ):
                hits.append(str(p.relative_to(root)))
    return hits


def shows(root) -> list[str]:
    """Which read commands still show the text."""
    out = []
    for name, args in (
        ("search", ["search", WORDS]),
        ("search-exact", ["search", "--mode", "exact", WORDS]),
        ("context", ["context", "party at the boathouse"]),
        ("tree", ["tree"]),
        ("where", ["where"]),
        ("recall", ["recall", "surprise party"]),
    ):
        proc = ct("-C", root, *args, check=False)
        if "boathouse" in proc.stdout + proc.stderr:
            out.append(name)
    return out


def clone(origin, path):
    subprocess.run(["git", "clone", "-q", str(origin), str(path)], check=True)
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    return path


def origin_and_store(tmp_path):
    """(bare origin, store a with it as its remote "origin"): nothing pushed yet."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    a = make_store(tmp_path / "a").root
    git(a, "remote", "add", "origin", str(origin))
    return origin, a


@pytest.fixture
def three_clones(tmp_path):
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    a = make_store(tmp_path / "a").root
    git(a, "config", "user.email", "t@example.org")
    git(a, "config", "user.name", "t")
    git(a, "remote", "add", "origin", str(origin))
    ct("-C", a, "add", "--session", "plans", "--ts", "2026-03-02T18:00:00Z", TEXT)
    ct(
        "-C",
        a,
        "add",
        "--session",
        "plans",
        "--ts",
        "2026-03-02T18:01:00Z",
        "Bring lanterns and a cake for the party",
    )
    ct(
        "-C",
        a,
        "add",
        "--session",
        "garden",
        "--ts",
        "2026-03-03T09:00:00Z",
        "Prune the apple trees in March",
    )
    ct("-C", a, "mark", f"Next: {TEXT}")  # a marker quoting the record goes with it
    ct("-C", a, "sync", "--set-upstream", "origin")
    b = clone(origin, tmp_path / "b")
    c = clone(origin, tmp_path / "c")  # the stale one: never pulls the forget
    return origin, a, b, c


def test_forget_everywhere_then_purge_history(three_clones):
    origin, a, b, c = three_clones
    tree_text = "".join(p.read_text() for p in (a / "tree").rglob("*.jsonl"))
    assert "boathouse" in tree_text, "the record is in a topic summary"
    assert "search" in shows(b) and in_files(b)

    preview = ct("-C", a, "forget", "--match", WORDS, "-n")
    assert "would forget 1 records" in preview.stderr and "boathouse" in preview.stdout
    assert in_files(a), "-n changed nothing"
    rid = preview.stdout.split()[2]
    lines = [
        json.loads(x) for p in (a / "log").rglob("*.jsonl") for x in p.read_text().splitlines()
    ]
    vkey = next(
        r["vkey"] for r in lines if r["id"] == rid
    )  # opens its sealed vector in every older pack

    n = len(commits(a))
    ct("-C", a, "forget", "--match", WORDS)
    assert len(commits(a)) == n + 1 and git_clean(a)
    assert in_files(a) == [] and shows(a) == []
    tomb = [json.loads(x) for x in (a / "forgotten.jsonl").read_text().splitlines()]
    marker = json.loads(ct("-C", b, "where", "--json").stdout)["markers"][0]["id"]
    # the marker quoting the record gets a tombstone too, so no merge brings its line back
    assert [t["id"] for t in tomb] == [rid, marker] and all(
        set(t) == {"id", "hash", "at"} for t in tomb
    )
    assert "boathouse" not in (a / "forgotten.jsonl").read_text()
    assert in_history(a), "history still holds it until --purge-history"

    ct("-C", a, "sync")
    ct("-C", b, "add", "--session", "b-only", "An unpushed note from the laptop about tulips")
    ct("-C", b, "sync")
    assert in_files(b) == [] and shows(b) == []

    # The stale clone adds on the same day and merges: union merges must not bring the line back.
    ct(
        "-C",
        c,
        "add",
        "--session",
        "c-only",
        "--ts",
        "2026-03-02T19:00:00Z",
        "A note from the stale desktop",
    )
    git(a, "pull", "-q", "--no-rebase", "--no-edit", str(c), "main")
    assert shows(a) == [], "readers drop tombstoned records whatever a merge kept"
    ct("-C", a, "sync")
    assert in_files(a) == [] and shows(a) == []
    assert "A note from the stale desktop" in ct("-C", a, "search", "stale desktop").stdout
    ct("-C", c, "sync")
    assert in_files(c) == [] and shows(c) == []

    # Purge: history rewritten on A, force-pushed; B follows and keeps its unpushed record.
    ct("-C", b, "sync")
    ct("-C", b, "add", "--session", "b-only", "Another unpushed note about daffodils")
    named_before = git(a, "log", "-p", "--all", "--", "tree").lower()
    assert "boathouse" in named_before and "dana" in named_before, (
        "older topic names and summaries hold its words"
    )
    out = ct("-C", a, "forget", "--purge-history", rid)
    assert "force" in out.stderr and "re-clone" in out.stderr
    assert not in_history(a) and in_files(a) == []
    assert vkey not in git(a, "log", "-p", "--all", "--", "log"), (
        "the key to its vector in older packs is gone too"
    )
    named = git(
        a, "log", "-p", "--all", "--", "tree"
    ).lower()  # words only the forgotten record said
    assert "boathouse" not in named and "dana" not in named and "[forgotten]" in named
    assert "lanterns" in named or "party" in named, "words other records say stay"
    refused = ct("-C", a, "sync", check=False)
    assert refused.returncode != 0 and "push --force" in refused.stderr
    assert not in_history(a), "a refused sync fetched nothing old"
    git(a, "push", "-q", "--force", "origin", "main")
    assert not in_history(origin)
    res = ct("-C", b, "sync")
    assert "rewritten" in res.stderr
    assert not in_history(b) and in_files(b) == [] and shows(b) == []
    assert "daffodils" in ct("-C", b, "search", "daffodils").stdout, "B's unpushed record kept"
    assert "tulips" in ct("-C", b, "search", "tulips").stdout
    ct("-C", a, "sync")
    assert "daffodils" in ct("-C", a, "search", "daffodils").stdout and not in_history(a)
    assert ct("-C", a, "fsck").returncode == 0 and ct("-C", b, "fsck").returncode == 0


def test_a_line_a_plain_git_merge_brings_back_is_named_and_forgotten_again(tmp_path):
    """Clone A forgets the day's last record; clone C, which still has it, appends after it; a plain
    `git pull` on A keeps the line (union merge of adjacent changes). Reads never show it and warn,
    fsck names it with the command (not as a missing vector to restore), and `ct forget ID` takes
    the line out again without a second tombstone."""
    origin, a = origin_and_store(tmp_path)
    ct("-C", a, "add", "--ts", "2026-03-02T17:00:00Z", "Buy paper lanterns for the garden")
    rid = json.loads(ct("-C", a, "add", "--ts", "2026-03-02T18:00:00Z", TEXT, "--json").stdout)[
        "ids"
    ][0]
    git(a, "push", "-q", "-u", "origin", "main")
    c = clone(origin, tmp_path / "c")
    ct("-C", a, "forget", rid)
    ct("-C", c, "add", "--ts", "2026-03-02T19:00:00Z", "A note from the stale desktop")
    git(c, "push", "-q", "origin", "main")
    ct(
        "-C", a, "hooks", "uninstall"
    )  # with them, post-merge removes it at once (test_forget_every_clone.py)
    git(a, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert in_files(a) == ["log/2026/2026-03-02.jsonl"], "git's union merge kept the line"
    assert shows(a) == []
    found = ct("-C", a, "search", "lanterns stale desktop")
    assert f"record {rid} was forgotten" in found.stderr and "brought its line back" in found.stderr
    fs = ct("-C", a, "fsck", "--json", check=False)
    rep = json.loads(fs.stdout)
    assert fs.returncode == 1 and not rep["ok"] and rep["warnings"] == [], (
        rep
    )  # the text is in the files again
    [damage] = rep["damage"]
    assert (
        "log/2026/2026-03-02.jsonl:2" in damage and f'"ct forget {rid}") removes it again' in damage
    )
    ct("-C", a, "forget", rid)
    assert in_files(a) == [] and shows(a) == []
    assert (a / "forgotten.jsonl").read_text().count(rid) == 1
    rep = json.loads(ct("-C", a, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
    assert ct("-C", a, "search", "stale desktop").stderr == "" and git_clean(a)


def test_a_forget_that_fails_at_its_commit_is_rolled_back_whole(tmp_path):
    """A forget rewrites files whole (day log, tree shards, markers) and consolidates packs before
    it commits. When git refuses the commit (here: a stale .git/index.lock), every rewritten file
    is put back from the bytes the journal kept: the store is as committed, the record is still
    there, and the forget works once git does."""
    st = make_store(tmp_path / "s")
    root = st.root
    st.add("first note about green tea", ts="2026-03-01T09:00:00Z")
    rid = st.add(TEXT, ts="2026-03-01T10:00:00Z").added[0]["id"]
    ct("-C", root, "mark", f"Next: {TEXT}")
    head = git(root, "rev-parse", "HEAD")
    lock = root / ".git" / "index.lock"
    lock.touch()
    os.utime(
        lock, (time.time() - 60, time.time() - 60)
    )  # older than the write: not its own, left alone
    failed = ct("-C", root, "forget", rid, check=False)
    assert failed.returncode == 8 and "index.lock" in failed.stderr
    lock.unlink()  # the person clears git's lock; the rollback git refused is finished by --repair
    repaired = ct("-C", root, "fsck", "--repair")
    assert repaired.returncode == 0 and git_clean(root), git(root, "status", "--short")
    assert (
        git(root, "rev-parse", "HEAD") == head
        and "boathouse" in ct("-C", root, "search", WORDS).stdout
    )
    assert not (root / ".memstore" / "write-journal-rewrites").exists()
    ct("-C", root, "forget", rid)
    assert in_files(root) == [] and shows(root) == [] and git_clean(root)


def test_a_forget_killed_after_its_commit_is_not_undone_on_a_crlf_checkout(tmp_path):
    """A forget that died after its commit but before its journal went: the rollback must leave the
    committed rewrite alone, also where the working files differ from the blobs byte for byte
    (core.autocrlf=true checks day logs out with CRLF); only the bytes kept for it are dropped."""
    origin = make_store(tmp_path / "origin").root
    ct("-C", origin, "add", "--ts", "2026-03-02T17:00:00Z", "Buy paper lanterns for the garden")
    ct("-C", origin, "add", "--ts", "2026-03-02T18:00:00Z", TEXT)
    root = tmp_path / "win"
    subprocess.run(
        ["git", "clone", "-q", "-c", "core.autocrlf=true", str(origin), str(root)], check=True
    )
    git(root, "config", "user.email", "t@example.org")
    git(root, "config", "user.name", "t")
    log = root / "log/2026/2026-03-02.jsonl"
    before = log.read_bytes()
    assert b"\r\n" in before
    rid = json.loads(ct("-C", root, "search", "--json", WORDS).stdout)["hits"][0]["id"]
    ct("-C", root, "forget", rid)
    after = log.read_bytes()
    # What a kill right after the commit leaves: the journal naming the rewrite and the old bytes.
    meta = root / ".memstore"
    (meta / "write-journal-rewrites/log/2026").mkdir(parents=True)
    (meta / "write-journal-rewrites/log/2026/2026-03-02.jsonl").write_bytes(before)
    journal = {"pid": 999999, "started": time.time() - 5, "head": None, "appended": {}}
    journal["rewritten"] = {"log/2026/2026-03-02.jsonl": True}
    (meta / "write-journal.json").write_text(json.dumps(journal))
    ct("-C", root, "fsck", "--repair")
    assert log.read_bytes() == after and in_files(root) == [] and git_clean(root)
    assert (
        not (meta / "write-journal-rewrites").exists()
        and not (meta / "write-journal.json").exists()
    )


def test_forget_by_id_session_and_time(tmp_path):
    st = make_store(tmp_path / "s")
    ids = []
    for i, (sess, ts) in enumerate(
        [
            ("x", "2026-03-01T10:00:00Z"),
            ("x", "2026-03-01T11:00:00Z"),
            ("y", "2026-03-05T10:00:00Z"),
            ("y", "2026-03-06T10:00:00Z"),
        ]
    ):
        ids.append(st.add(f"note number {i} about herons", session=sess, ts=ts).added[0]["id"])
    res = st.forget([ids[0]])
    assert [r["id"] for r in res.records] == [ids[0]] and res.commit
    res = st.forget(session="y", since="2026-03-06T00:00:00Z")
    assert [r["id"] for r in res.records] == [ids[3]]
    res = st.forget(since="2026-03-01T00:00:00Z", until="2026-03-02T00:00:00Z", dry_run=True)
    assert [r["id"] for r in res.records] == [ids[1]] and res.commit is None
    left = json.loads(ct("-C", st.root, "search", "--json", "--mode", "exact", "herons").stdout)[
        "hits"
    ]
    assert sorted(h["id"] for h in left) == sorted([ids[1], ids[2]])
    bad = ct("-C", st.root, "forget", "nope", check=False)
    assert bad.returncode == 2 and "no record with id" in bad.stderr
    again = ct("-C", st.root, "forget", ids[0], check=False)
    assert again.returncode == 2 and "forgotten already" in again.stderr
    none = ct("-C", st.root, "forget", check=False)
    assert none.returncode == 2 and "say what to forget" in none.stderr
    assert git_clean(st.root)


def test_forget_by_commit_undoes_an_import_whatever_came_after(tmp_path):
    """`ct forget --commit REV`: every record that commit added (over its first parent), and only
    those, in one commit; the writes before and after it on the same day stay; asked again, or for
    a commit that added none, or a name that is no commit, it says so and changes nothing."""
    st = make_store(tmp_path / "s")
    root = st.root
    before = st.add("a note before the import", ts="2026-03-01T09:00:00Z").added[0]["id"]
    f = tmp_path / "wrong.jsonl"
    f.write_text(
        "".join(
            json.dumps(
                {
                    "ts": f"2026-03-01T10:0{i}:00Z",
                    "role": "user",
                    "text": f"wrong file line {i} about otters",
                }
            )
            + "\n"
            for i in range(5)
        )
    )
    imported = json.loads(ct("-C", root, "import", "jsonl", f, "--json").stdout)["ids"]
    sha = git(root, "rev-parse", "--short", "HEAD").strip()
    after = st.add("a note after the import", ts="2026-03-01T11:00:00Z").added[0]["id"]
    mark = ct("-C", root, "mark", "halfway through the cleanup")
    assert mark.returncode == 0

    preview = json.loads(ct("-C", root, "forget", "--commit", sha, "-n", "--json").stdout)
    assert sorted(r["id"] for r in preview["records"]) == sorted(imported) and len(imported) == 5
    assert git(root, "rev-parse", "--short", "HEAD~1").strip() != sha  # later writes came after it
    done = json.loads(ct("-C", root, "forget", "--commit", sha, "--json").stdout)
    assert sorted(r["id"] for r in done["records"]) == sorted(imported) and done["commit"]
    left = json.loads(
        ct("-C", root, "search", "--json", "--mode", "exact", "note import otters").stdout
    )["hits"]
    assert sorted(h["id"] for h in left) == sorted([before, after])
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep

    again = ct("-C", root, "forget", "--commit", sha, check=False)
    assert again.returncode == 2 and "forgotten already" in again.stderr
    nothing = ct("-C", root, "forget", "--commit", "HEAD~1", check=False)  # the marker's commit
    assert nothing.returncode == 2 and "added no records" in nothing.stderr
    bad = ct("-C", root, "forget", "--commit", "no-such-rev", check=False)
    assert bad.returncode == 2 and "is not a commit" in bad.stderr
    assert git_clean(root)


def test_forget_over_mcp_and_http(tmp_path):
    import threading
    import urllib.request

    import anyio

    from memstore.serve.mcp import MemoryServer, build_server
    from memstore.serve.http import make_server

    st = make_store(tmp_path / "s")
    st.add("The spare key is under the blue flowerpot by the door", session="home")
    st.add("Water the ferns on Sunday", session="home")
    wrong = st.add("A note added by mistake about the neighbours", session="home")

    async def main():
        mem = MemoryServer(st.root)
        preview = await mem.forget(match="spare key flowerpot", dry_run=True)
        done = await mem.forget(match="spare key flowerpot")
        undone = await mem.forget(commit=wrong.commit)
        return preview, done, undone

    preview, done, undone = anyio.run(main)
    assert "flowerpot" in preview["records"][0]["text"] and preview["commit"] is None
    assert done["commit"] and len(done["forgotten"]) == 1
    assert undone["forgotten"] == [wrong.added[0]["id"]] and undone["commit"]
    _server, mem = build_server(st.root)
    assert mem is not None
    assert "flowerpot" not in ct("-C", st.root, "search", "spare key").stdout

    server = make_server(st.root, port=0, log=False, writable=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/forget",
            method="POST",
            data=json.dumps({"match": "ferns Sunday"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = json.loads(resp.read())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert out["commit"] and len(out["forgotten"]) == 1
    assert "ferns" not in ct("-C", st.root, "search", "ferns").stdout
    assert git_clean(st.root)


def test_a_forgotten_record_does_not_come_back_by_importing_its_source_again(tmp_path):
    st = make_store(tmp_path / "s")
    f = tmp_path / "turns.jsonl"
    f.write_text(
        json.dumps(
            {"ts": "2026-03-01T10:00:00Z", "role": "user", "text": "my locker is number 4417"}
        )
        + "\n"
        + json.dumps({"ts": "2026-03-01T10:01:00Z", "role": "user", "text": "buy oat milk"})
        + "\n"
    )
    ct("-C", st.root, "import", "jsonl", f)
    ct("-C", st.root, "forget", "--match", "locker 4417")
    (
        st.root / ".memstore" / "import-state.json"
    ).unlink()  # the cursor is disposable: the file is read again
    proc = ct("-C", st.root, "import", "jsonl", f)
    assert "forgotten earlier" in proc.stderr
    assert "4417" not in "".join(p.read_text() for p in (st.root / "log").rglob("*.jsonl"))
    assert git_clean(st.root)


def test_what_a_plain_merge_keeps_of_a_forget_is_named_and_removed(tmp_path):
    """Two clones forget different records of one day: neither rewrites a pack (each vector is sealed
    under the key its line held), so after a plain `git pull` no pack opens to a forgotten vector with
    any key in the work tree. A clone that marked and named a topic before it learnt of the forgets brings back the
    marker's line and a summary quoting the record. Reads never show any of it; fsck names each
    with the command; `ct forget` takes them out (no second tombstone for a record), and after
    that no tracked file holds a forgotten id, its text or its words."""
    from memstore.format import pack

    origin, a = origin_and_store(tmp_path)
    pin = "Zebra crossing password is tulip seven"
    ids = [
        json.loads(
            ct(
                "-C", a, "add", "--session", "s", "--ts", f"2026-03-02T1{i}:00:00Z", t, "--json"
            ).stdout
        )["ids"][0]
        for i, t in enumerate(
            [TEXT, "Water the ferns on the balcony", "Call the plumber about the sink", pin]
        )
    ]
    ct(
        "-C",
        a,
        "add",
        "--session",
        "s",
        "--ts",
        "2026-03-02T14:00:00Z",
        "Another zebra crossing note here",
    )
    ct("-C", a, "mark", f"Next: {TEXT}")
    git(a, "push", "-q", "-u", "origin", "main")
    b = clone(origin, tmp_path / "b")
    c = clone(
        origin, tmp_path / "c"
    )  # marks and adds to the topic before it learns of either forget
    ct("-C", a, "forget", ids[3])  # the zebra topic's opening line
    git(a, "push", "-q", "origin", "main")
    ct("-C", b, "forget", ids[0])  # the marker quoting it goes with it, with its own tombstone
    git(b, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    ct("-C", c, "mark", "c was here")
    ct(
        "-C",
        c,
        "add",
        "--session",
        "s",
        "--ts",
        "2026-03-02T14:10:00Z",
        "A third zebra crossing note from c",
    )
    git(b, "pull", "-q", "--no-rebase", "--no-edit", str(c), "main")
    forgotten = {ids[0], ids[3]}

    def held(root):  # the record ids whose vectors open with the keys the work tree holds
        return {
            rid
            for folder in pack.all_pack_days(root).values()
            for rid in pack.day_vectors(root, folder.name)
        }

    assert not forgotten & held(b), "no key in the work tree opens a forgotten vector"
    assert shows(b) == [] and "tulip" not in ct("-C", b, "context", "zebra crossing").stdout
    fs = ct("-C", b, "fsck", "--json", check=False)
    rep = json.loads(fs.stdout)
    assert fs.returncode == 1 and rep["warnings"] == [], (
        rep
    )  # what a forget removed is back: damage
    said = "\n".join(rep["damage"])
    assert not any(f'"ct forget {rid}"' in said for rid in forgotten), (
        said
    )  # nothing of theirs to remove
    assert (
        "markers.jsonl: marker" in said and "its summary quotes a record it no longer holds" in said
    ), said
    again = [w.split('"ct forget ')[1].split('"')[0] for w in rep["damage"]]
    before = (b / "forgotten.jsonl").read_text()
    ct("-C", b, "forget", *again)
    after = json.loads(ct("-C", b, "fsck", "--json").stdout)
    assert after["warnings"] == [] and after["damage"] == []
    assert not forgotten & held(b) and git_clean(b)
    assert all(before.count(rid) == 1 for rid in forgotten)
    tracked = git(b, "ls-files").split()
    for words in (pin, "tulip", TEXT, "boathouse"):
        assert not [p for p in tracked if words.encode() in (b / p).read_bytes()], words
    assert "A third zebra crossing note" in ct("-C", b, "search", "third zebra").stdout


def test_a_plain_pull_of_the_old_history_after_a_purge_is_named_and_purged_again(three_clones):
    """`ct sync` refuses to merge the remote's old history back after --purge-history; a plain
    `git pull` does it anyway. fsck names the old commit that is back and the command that rewrites
    history again, and after it no commit holds the text."""
    origin, a, b, c = three_clones
    rid = ct("-C", a, "forget", "--match", WORDS, "-n").stdout.split()[2]
    ct("-C", a, "forget", "--purge-history", "--match", WORDS)
    assert not in_history(a)
    git(
        a, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main"
    )  # the old history, text and all
    assert in_history(a)
    rep = json.loads(ct("-C", a, "fsck", "--json").stdout)
    said = "\n".join(rep["warnings"])
    assert "of the old history that ct forget --purge-history rewrote" in said, said
    assert f'"ct forget --purge-history {rid}" rewrites it again' in said, said
    ct("-C", a, "forget", "--purge-history", rid)
    assert not in_history(a)
    assert "old history" not in "\n".join(
        json.loads(ct("-C", a, "fsck", "--json").stdout)["warnings"]
    )


def test_a_topic_a_forget_empties_leaves_the_tree_and_a_stale_clone_merges(tmp_path):
    """Forgetting the only record of a topic takes the topic out of the tree (a gone op), rather than
    leaving an "Untitled topic" of 0 turns; a clone that still had the record and placed another
    turn in that topic merges with plain git, and both stores end clean."""
    from memstore.format import tree as treefmt

    origin, a = origin_and_store(tmp_path)
    ct("-C", a, "add", "--ts", "2026-03-01T10:00:00Z", "zebra crossing note one")
    rid = json.loads(ct("-C", a, "add", "--ts", "2026-03-02T10:00:00Z", TEXT, "--json").stdout)[
        "ids"
    ][0]
    git(a, "push", "-q", "-u", "origin", "main")
    c = clone(origin, tmp_path / "c")
    tid = treefmt.read(a).topic_of()[rid]
    ct("-C", a, "forget", rid)
    tree = treefmt.read(a)
    assert tid not in tree.topics and tid in tree.gone
    assert "Untitled topic" not in ct("-C", a, "tree").stdout
    ct(
        "-C",
        c,
        "add",
        "--ts",
        "2026-03-02T10:05:00Z",
        "The surprise party needs lanterns and a cake too",
    )
    git(c, "push", "-q", "origin", "main")
    git(a, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    for root in (a, c):
        rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
        assert rep["ok"] and rep["damage"] == [], rep
    assert "lanterns and a cake" in ct("-C", a, "search", "lanterns cake").stdout
    assert "Untitled topic" not in ct("-C", a, "tree").stdout and shows(a) == []


@pytest.mark.parametrize("hooks", [False, True])
def test_an_earlier_summary_quoting_a_forgotten_record_that_a_rename_replaced_is_named_and_removed(
    tmp_path, hooks
):
    """A clone that had not learnt of a forget names the topic after the forgotten record; the clone
    that forgot it names the topic again later, so after a plain merge replay shows only that later
    summary. The replaced line still quotes the record in its shard: fsck names it, --repair writes
    the current summary over it (the tree replays the same), and no tracked file holds the words
    after. With memstore's hooks installed the merge itself is cleaned."""
    origin, a = origin_and_store(tmp_path)
    pin = "Zebra crossing password is tulip seven"

    def add(root, text, minute):
        return ct("-C", root, "add", "--session", "s", "--ts", f"2026-03-02T10:{minute}:00Z", text)

    def tree_bytes(root):
        return b"".join(p.read_bytes() for p in (root / "tree").rglob("*.jsonl"))

    rid = json.loads(
        ct("-C", a, "add", "--session", "s", "--ts", "2026-03-02T10:00:00Z", pin, "--json").stdout
    )["ids"][0]
    add(a, "Another zebra crossing note here", "01")
    git(a, "push", "-q", "-u", "origin", "main")
    c = clone(origin, tmp_path / "c")
    if hooks:
        ct("-C", c, "hooks", "install")
    ct("-C", a, "forget", rid)
    add(c, "A third zebra crossing note from c", "02")  # c names the topic after the pin
    assert pin.encode() in tree_bytes(c)
    add(a, "A fourth zebra crossing note from a", "03")  # a names it later, without the pin
    git(a, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    shown = ct("-C", c, "tree", "--json").stdout
    assert "tulip" not in shown
    if hooks:
        assert b"tulip" not in tree_bytes(c) and git_clean(c), "the post-merge hook cleaned it"
        assert json.loads(ct("-C", c, "fsck", "--json").stdout)["damage"] == []
        return
    assert pin.encode() in tree_bytes(c), "the replaced line still quotes the forgotten record"
    fs = ct("-C", c, "fsck", "--json", check=False)
    rep = json.loads(fs.stdout)
    assert fs.returncode == 1, rep
    said = "\n".join(rep["damage"])
    assert "an earlier summary of it, which a later rename replaced" in said, said
    ct("-C", c, "fsck", "--repair")
    assert b"tulip" not in tree_bytes(c)
    assert ct("-C", c, "tree", "--json").stdout == shown, "the tree replays the same"
    after = json.loads(ct("-C", c, "fsck", "--json").stdout)
    assert after["damage"] == [] and git_clean(c)
    assert not [p for p in git(c, "ls-files").split() if b"tulip" in (c / p).read_bytes()]
