"""Private and shared records (issue 31, item 2): the `scope` field, `ct add --private`, the
`--scope` filter, private lines sealed to their writer alone in an encrypted store, and `ct share`."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import commits, ct, git_clean, log_records
from test_encrypt import as_, git, people, sealed_clones, words_in_objects  # noqa: F401

SECRET_WORDS = ["quokka", "marzipan"]  # only in the private record
PRIVATE = f"the {SECRET_WORDS[0]} alarm code is {SECRET_WORDS[1]}"
TOKEN = (
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
)  # a GitHub token's shape: the scanner flags it


def hits(ident, root, query, *extra):
    """The texts of the word matches (exact mode: the hashing embedder's vectors match anything)."""
    out = json.loads(as_(ident, root, "search", query, "--json", "--mode", "exact", *extra).stdout)
    return [h["text"] for h in out["hits"]]


def ids_of(ident, root, query, *extra):
    out = json.loads(as_(ident, root, "search", query, "--json", *extra).stdout)
    return [h["id"] for h in out["hits"]]


# ----- a plain store: a label and a filter ----------------------------------------------------------


def test_plain_store_private_is_a_label_a_filter_and_a_warning_said_once(store):
    root = store.root
    first = ct(
        "-C", root, "add", "--private", f"{PRIVATE} remember", "--ts", "2026-11-02T09:00:00Z"
    )
    assert "is not encrypted" in first.stderr and "docs/security.md" in first.stderr
    again = ct("-C", root, "add", "--scope", "private", "second private note quokka")
    assert "is not encrypted" not in again.stderr  # once per clone
    ct("-C", root, "add", "a shared note about the quokka enclosure")
    recs = {r["text"]: r for r in log_records(root)}
    assert recs[f"{PRIVATE} remember"]["scope"] == "private"
    assert "scope" not in recs["a shared note about the quokka enclosure"]  # no field: shared
    # the private record's commit subject does not carry its text
    assert "Add private user turn" in commits(root) and not any("alarm" in c for c in commits(root))
    texts = lambda *a: [  # noqa: E731
        h["text"]
        for h in json.loads(
            ct("-C", root, "search", "quokka", "--json", "--mode", "exact", *a).stdout
        )["hits"]
    ]
    assert sorted(texts("--scope", "private")) == sorted(
        [f"{PRIVATE} remember", "second private note quokka"]
    )
    assert texts("--scope", "shared") == ["a shared note about the quokka enclosure"]
    assert len(texts()) == 3  # a plain store hides nothing
    out = json.loads(ct("-C", root, "search", "alarm", "--json", "--mode", "exact").stdout)["hits"][
        0
    ]
    assert out["scope"] == "private"
    assert "[private]" in ct("-C", root, "search", "alarm").stdout
    assert git_clean(root)


def test_a_private_record_stays_out_of_the_topic_tree(store):
    ct("-C", store.root, "add", "--private", "the zebra secret plan for the quokka")
    ct("-C", store.root, "add", "the zebra public plan for the quokka")
    private, shared = (
        next(r["id"] for r in log_records(store.root) if r["text"].startswith(f"the zebra {w}"))
        for w in ("secret", "public")
    )
    ops = "".join(p.read_text() for p in (store.root / "tree").rglob("*.jsonl"))
    assert shared in ops and private not in ops and "secret" not in ops


def test_store_setting_makes_new_records_private_and_imports_follow_import_scope(store, tmp_path):
    toml = store.root / "memstore.toml"
    toml.write_text(
        toml.read_text().replace(
            "[settings]", '[settings]\nscope = "private"\nimport_scope = "shared"'
        )
    )
    subprocess.run(["git", "-C", str(store.root), "commit", "-qam", "settings"], check=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"})  # fmt: skip
    ct("-C", store.root, "add", "defaults to private by the setting")
    ct("-C", store.root, "add", "--scope", "shared", "shared on purpose")
    src = tmp_path / "t.jsonl"
    src.write_text(
        json.dumps({"ts": "2026-11-02T10:00:00Z", "role": "user", "text": "imported"}) + "\n"
    )
    ct("-C", store.root, "import", "jsonl", src)
    scope = {r["text"]: r.get("scope") for r in log_records(store.root)}
    assert scope == {
        "defaults to private by the setting": "private",
        "shared on purpose": None,
        "imported": None,
    }
    toml.write_text(toml.read_text().replace('scope = "private"', 'scope = "team"'))
    bad = ct("-C", store.root, "search", "x", check=False)
    assert (
        bad.returncode == 4 and "memstore.toml" in bad.stderr and "[settings] scope" in bad.stderr
    )


def test_share_in_a_plain_store_previews_flags_secrets_asks_and_makes_one_commit(store):
    root = store.root
    ct("-C", root, "add", "--private", f"deploy with {TOKEN} tonight", "--allow-secrets")
    rid = json.loads(ct("-C", root, "search", "deploy", "--json").stdout)["hits"][0]["id"]
    before = commits(root)
    preview = ct("-C", root, "share", rid, "-n")
    assert f"deploy with {TOKEN} tonight" in preview.stdout  # exactly what will be shared
    assert "! secret (github-token)" in preview.stdout or "! secret (" in preview.stdout
    assert commits(root) == before
    no_tty = ct("-C", root, "share", rid, check=False)  # no terminal and no --yes: nothing shared
    assert no_tty.returncode == 2 and "--yes" in no_tty.stderr and commits(root) == before
    done = json.loads(ct("-C", root, "share", rid, "--yes", "--json").stdout)
    assert done["shared"] == 1 and done["secrets"] >= 1 and done["commit"]
    assert commits(root) == ["Share 1 private record", *before]
    (rec,) = log_records(root)
    assert "scope" not in rec and rec["id"] == rid
    assert json.loads(ct("-C", root, "search", "deploy", "--json", "--scope", "shared").stdout)[
        "hits"
    ]
    again = json.loads(ct("-C", root, "share", rid, "--yes", "--json").stdout)
    assert again["shared"] == 0 and again["already_shared"] == [rid]
    unknown = ct("-C", root, "share", "nosuchid", "--yes", check=False)
    assert unknown.returncode == 2 and "nosuchid" in unknown.stderr
    assert git_clean(root)


# ----- an encrypted store: sealed to the writer alone -------------------------------------------------


def test_private_record_is_unreadable_in_another_members_clone_until_shared(
    tmp_path, people, sealed_clones
):
    alice, _ra, bob, _rb = people
    a, b, remote = sealed_clones
    as_(alice, a, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")
    as_(alice, a, "add", "shared tea plans for the team", "--ts", "2026-11-02T09:01:00Z")
    assert hits(alice, a, SECRET_WORDS[0]) == [PRIVATE]  # the writer reads it
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")

    # B: not in search, recall, the page's day view, export; counted in fsck and stat, no error
    for w in SECRET_WORDS:
        assert PRIVATE not in hits(bob, b, w)
    assert hits(bob, b, "tea") == ["shared tea plans for the team"]
    recall = as_(bob, b, "recall", "what did we say on 2026-11-02", "--json").stdout
    assert "tea plans" in recall and SECRET_WORDS[0] not in recall
    ct("--identity", bob, "-C", b, "export", "contexttape", tmp_path / "tape")
    dumped = b"".join(p.read_bytes() for p in (tmp_path / "tape").rglob("*") if p.is_file())
    assert b"tea plans" in dumped and SECRET_WORDS[0].encode() not in dumped
    fsck = json.loads(as_(bob, b, "fsck", "--json").stdout)
    assert fsck["ok"] and fsck["others_private"] == 1 and fsck["records"] == 1
    assert "1 private lines of other writers" in as_(bob, b, "fsck").stdout
    assert json.loads(as_(bob, b, "stat", "--json").stdout)["others_private_lines"] == 1
    assert json.loads(as_(alice, a, "stat", "--json").stdout)["private_records"] == 1

    # the remote's objects: no word of it, and B's identity opens no key of its line
    assert words_in_objects(remote, SECRET_WORDS) == {}
    from memstore import keyring
    from memstore.format import sealed_lines

    bob_ids = keyring.load_identities(bob)
    (key_file,) = keyring.private_files(a).values()
    assert keyring.unwrap_private(key_file, key_file.stem[8:], bob_ids) is None
    assert keyring.unwrap_private(key_file, key_file.stem[8:], keyring.load_identities(alice))
    day = "log/2026/2026-11-02.jsonl"
    raw = subprocess.run(
        ["git", "-C", str(remote), "show", f"main:{day}"], capture_output=True, check=True
    ).stdout
    assert sum(line.startswith(sealed_lines.PRIVATE_PREFIX) for line in raw.split(b"\n")) == 1
    bobs = keyring.open_store(b, bob)
    assert SECRET_WORDS[0].encode() not in bobs.open_data(b / day, raw)
    assert bobs.hidden[day] == 1

    # A shares it: one commit; after a pull B reads it
    rid = ids_of(alice, a, SECRET_WORDS[0], "--scope", "private")[0]
    head = git(a, "rev-parse", "HEAD").stdout.strip()
    as_(alice, a, "share", rid, "--yes")
    assert git(a, "rev-list", "--count", f"{head}..HEAD").stdout.strip() == "1"
    assert git(a, "show", "--stat", "--format=%s", "HEAD").stdout.split()[:3] == [
        "Share", "(encrypted", "store)"]  # fmt: skip
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert hits(bob, b, SECRET_WORDS[0]) == [PRIVATE]
    assert json.loads(as_(bob, b, "fsck", "--json").stdout)["others_private"] == 0
    for ident, root in ((alice, a), (bob, b)):
        assert hits(ident, root, SECRET_WORDS[0], "--scope", "private") == []
        assert git_clean(root)


def test_another_members_rewrites_and_gc_keep_a_private_line_and_its_vector(people, sealed_clones):
    alice, _ra, bob, _rb = people
    a, b, _remote = sealed_clones
    as_(alice, a, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")
    as_(alice, a, "add", "a shared pancake recipe", "--ts", "2026-11-02T09:01:00Z")
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    # B forgets a shared record of that day (a rewrite of the day log from B's view) and
    # consolidates the day's packs: neither may drop A's private line or its vector
    as_(bob, b, "forget", "--match", "pancake")
    for i in range(3):
        as_(bob, b, "add", f"filler {i}", "--ts", f"2026-11-02T10:0{i}:00Z")
    as_(bob, b, "gc")
    assert json.loads(as_(bob, b, "fsck", "--json").stdout)["others_private"] == 1
    git(b, "push", "-q", "origin", "main")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    assert hits(alice, a, SECRET_WORDS[0]) == [PRIVATE]
    assert "pancake" not in " ".join(hits(alice, a, "pancake"))
    fs = as_(alice, a, "fsck", "--json", check=False)
    assert fs.returncode == 0, fs.stdout  # its vector is still in a pack its key opens
    rb = as_(bob, b, "reembed", "--embedder", "hash", "--dim", "64", check=False)
    assert rb.returncode == 10 and "another writer's private records" in rb.stderr
    assert git_clean(b)


def test_a_share_next_to_lines_another_clone_appended_merges_and_gc_drops_the_private_copy(
    tmp_path,
):
    from conftest import make_store

    origin = make_store(tmp_path / "origin").root
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    git(origin, "remote", "add", "origin", str(remote))
    git(origin, "push", "-q", "-u", "origin", "main")
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(a))
    git(tmp_path, "clone", "-q", str(remote), str(b))
    ct("-C", a, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    rid = json.loads(ct("-C", a, "search", "alarm", "--json").stdout)["hits"][0]["id"]
    ct("-C", a, "share", rid, "--yes")
    ct("-C", b, "add", "appended on b", "--ts", "2026-11-02T09:05:00Z")
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")  # plain git: a union merge
    scopes = [r.get("scope") for r in log_records(b) if r["id"] == rid]
    assert sorted(scopes, key=str) == [None, "private"]  # both copies kept by the merge
    assert (
        json.loads(ct("-C", b, "search", "alarm", "--json", "--scope", "private").stdout)["hits"]
        == []
    )  # the shared copy wins
    ct("-C", b, "gc")
    assert [r.get("scope") for r in log_records(b) if r["id"] == rid] == [None]
    assert git_clean(b)


def test_add_scope_over_mcp_and_http_share(store):
    import asyncio

    from memstore.serve.mcp import MemoryServer

    from mcp.server.mcpserver.exceptions import ToolError

    mem = MemoryServer(store.root)
    try:
        added = asyncio.run(mem.add("an mcp private note about otters", scope="private"))
        rid = added["ids"][0]
        found = asyncio.run(mem.search("otters", scope="private"))
        assert [h["id"] for h in found["hits"]] == [rid] and found["hits"][0]["scope"] == "private"
        preview = asyncio.run(mem.share([rid], dry_run=True))
        assert preview["records"][0]["text"] == "an mcp private note about otters"
        assert preview["commit"] is None
        before = commits(store.root)
        # a share cannot be taken back: an agent may preview one, only the user's flag lets it share
        with pytest.raises(ToolError, match='"ct mcp --allow-share"') as refused:
            asyncio.run(mem.share([rid]))
        assert "ct share ID" in str(refused.value)
        assert commits(store.root) == before
        assert [h["id"] for h in asyncio.run(mem.search("otters", scope="private"))["hits"]] == [
            rid
        ]
    finally:
        mem.close()
    mem = MemoryServer(store.root, allow_share=True)
    try:
        done = asyncio.run(mem.share([rid]))
        assert done["shared"] == 1 and done["commit"]
        assert asyncio.run(mem.search("otters", scope="private"))["hits"] == []
    finally:
        mem.close()
    from memstore.serve.http import ENDPOINTS

    share = ENDPOINTS["/share"]
    assert share.writes and "POST" in share.methods and share.methods == ("POST",)


@pytest.mark.parametrize("value", ["team", 3])
def test_a_bad_scope_is_refused_and_changes_nothing(store, value):
    from memstore.errors import UsageError

    with pytest.raises(UsageError, match="scope must be one of private|shared"):
        store.add("x", scope=value)
    assert log_records(store.root) == []


def test_the_remote_guard_takes_a_private_line_and_refuses_a_forged_one(people, sealed_clones):
    alice, _ra, _bob, _rb = people
    a, _b, remote = sealed_clones
    ct("-C", remote, "hooks", "install")
    as_(alice, a, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")  # the day's 1st line
    git(a, "push", "-q", "--no-verify", "origin", "main")  # a private line passes the guard
    with open(a / "log/2026/2026-11-02.jsonl", "ab") as f:
        f.write(b"ms1p.nothex.AAAA\n")
    git(a, "commit", "-qam", "a forged line")
    pushed = git(a, "push", "--no-verify", "origin", "main", check=False)
    assert pushed.returncode != 0
    assert "2026-11-02.jsonl:2: a plain or damaged line in an encrypted store" in pushed.stderr


def test_the_page_reviews_private_records_and_shares_one_with_a_write_token(store, tmp_path):
    from memstore.serve import tokens
    from test_serve_auth import READ, WRITE, call, running, tokens_file

    store.add(f"private deploy note {TOKEN}", scope="private", secrets="allow")
    store.add("a shared line", ts="2026-11-02T09:00:00Z")
    grants = tokens.load(tokens_file(tmp_path), store.root)
    before = commits(store.root)
    with running(store.root, writable=True, tokens=grants) as base:
        # --writable alone: a share's preview, never the share (it cannot be taken back)
        rid = call(base, "/view/private", token=READ)[2]["records"][0]["id"]
        status, _, out = call(base, "/share", {"ids": [rid]}, token=WRITE)
        assert status == 403 and '"ct serve --allow-share"' in out["error"], out
        status, _, out = call(base, "/share", {"ids": [rid], "dry_run": True}, token=WRITE)
        assert status == 200 and out["records"][0]["id"] == rid, out
    with running(store.root, writable=True, tokens=grants, allow_share=True) as base:
        # the record holds a secret the scanner flags: --allow-secrets-override as well
        status, _, out = call(base, "/share", {"ids": [rid]}, token=WRITE)
        assert status == 403 and '"ct serve --allow-secrets-override"' in out["error"], out
    assert commits(store.root) == before
    with running(
        store.root, writable=True, tokens=grants, allow_share=True, allow_secrets_override=True
    ) as base:
        status, _, out = call(base, "/view/private", token=READ)
        assert status == 200 and len(out["records"]) == 1, out
        (rec,) = out["records"]
        assert TOKEN not in rec["text"] and rec["secrets"]  # masked for the page, and flagged
        before = commits(store.root)
        status, _, out = call(base, "/share", {"ids": [rec["id"]]}, token=READ)
        assert status == 403 and commits(store.root) == before, out
        status, _, out = call(base, "/share", {"ids": [rec["id"]], "dry_run": True}, token=WRITE)
        assert status == 200 and out["commit"] is None and commits(store.root) == before, out
        status, _, out = call(base, "/share", {"ids": [rec["id"]]}, token=WRITE)
        assert status == 200 and out["shared"] == 1 and out["commit"], out
        assert call(base, "/view/private", token=READ)[2]["records"] == []
        _, _, page = call(base, "/", headers={"Accept": "text/html"}, token=READ)
        assert b'id="view-private"' in page
        _, _, app = call(base, "/assets/app.js", token=READ)
        assert b'post("/share"' in app
    assert commits(store.root)[0] == "Share 1 private record" and git_clean(store.root)


def test_history_rewrites_keep_private_lines_theirs_and_purge_ones_own(people, sealed_clones):
    """`ct keys rotate --rewrite` and `ct forget --purge-history` rewrite every commit: a private
    line is sealed again under its writer's own key by that writer (never as a shared line's
    plaintext), another writer's is kept byte for byte, and a purged private record leaves no
    object that holds its line."""
    alice, _ra, bob, _rb = people
    a, b, remote = sealed_clones
    as_(bob, b, "add", "--private", "bob's heron notebook", "--ts", "2026-11-02T08:00:00Z")
    git(b, "push", "-q", "origin", "main")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    theirs = [  # bob's private line, as alice's clone holds it
        line
        for line in (a / "log/2026/2026-11-02.jsonl").read_bytes().splitlines()
        if line.startswith(b"ms1p.")
    ]
    assert len(theirs) == 1
    as_(alice, a, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")
    as_(alice, a, "add", "--private", "the lemur itinerary", "--ts", "2026-11-02T09:01:00Z")
    as_(alice, a, "add", "a shared pancake recipe", "--ts", "2026-11-02T09:02:00Z")
    as_(alice, a, "keys", "rotate", "--rewrite")
    assert hits(alice, a, SECRET_WORDS[0]) == [PRIVATE]
    assert hits(alice, a, "lemur") == ["the lemur itinerary"]
    assert hits(alice, a, "pancake") == ["a shared pancake recipe"]
    assert json.loads(as_(alice, a, "fsck", "--json").stdout)["others_private"] == 1
    after = (a / "log/2026/2026-11-02.jsonl").read_bytes().splitlines()
    assert [x for x in theirs if x in after], "bob's private line was not kept byte for byte"
    # alice forgets her own private record with the history purged: no object holds its line
    mine = {
        line for line in after if line.startswith(b"ms1p.") and line not in theirs
    }  # her two private lines as they are now
    as_(alice, a, "forget", "--match", "lemur", "--purge-history")
    assert hits(alice, a, "lemur") == []
    assert hits(alice, a, SECRET_WORDS[0]) == [PRIVATE]
    raw = subprocess.run(
        ["git", "-C", str(a), "cat-file", "--batch-all-objects", "--batch"], capture_output=True
    ).stdout
    now = (a / "log/2026/2026-11-02.jsonl").read_bytes().splitlines()
    assert len(mine) == 2 and sum(line in now for line in mine) == 1, (mine, now)
    assert sum(line in raw for line in mine) == 1, "the forgotten private line is still an object"
    assert json.loads(as_(alice, a, "fsck", "--json").stdout)["ok"]


def test_ct_encrypt_seals_records_labelled_private_to_the_users_own_key(tmp_path, people):
    """A plaintext store's private label becomes real when it is encrypted: those records are
    sealed to the encrypting user's private key (the other recipient cannot read them), the rest
    to everyone."""
    alice, _ra, bob, rb = people
    root, clone = tmp_path / "plain", tmp_path / "bobs"
    ct("init", root, "--embedder", "hash", "--timezone", "UTC")
    ct("-C", root, "add", "--private", PRIVATE, "--ts", "2026-11-02T09:00:00Z")
    ct("-C", root, "add", "a shared pancake recipe", "--ts", "2026-11-02T09:01:00Z")
    proc = as_(alice, root, "encrypt", "--recipient", rb)
    out = proc.stdout + proc.stderr
    assert "1 record(s) labelled private are sealed to your own key" in out
    assert hits(alice, root, SECRET_WORDS[0]) == [PRIVATE]
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert hits(bob, clone, "pancake") == ["a shared pancake recipe"]
    assert hits(bob, clone, SECRET_WORDS[0]) == []
    assert json.loads(as_(bob, clone, "fsck", "--json").stdout)["others_private"] == 1
    assert json.loads(as_(alice, root, "fsck", "--json").stdout)["ok"]
