"""Who put each record into memory (the record field `author`): where the name comes from, that
imports carry the importer, that a bad value is refused, that every face shows it and `--author`
filters by it; and whether git verifies a signed commit (`ct log`, the page's History)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import urllib.request

import anyio
import pytest

from conftest import commits, ct, git_clean

ANA = "Ana Lopez <ana@example.com>"


@pytest.fixture(autouse=True)
def _no_outside_git_identity(tmp_path_factory, monkeypatch):
    """Only the identities a test sets: no global or system git config, no GIT_AUTHOR_*."""
    empty = tmp_path_factory.getbasetemp() / "empty-gitconfig"
    empty.touch()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)


def git(root, *args, check=True) -> str:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert out.returncode == 0 or not check, out.stderr
    return out.stdout.strip()


def identity(root, name="Ana Lopez", email="ana@example.com") -> None:
    git(root, "config", "user.name", name)
    git(root, "config", "user.email", email)


def lines(root) -> list[dict]:
    out = []
    for path in sorted((root / "log").rglob("*.jsonl")):
        out += [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return out


def by_text(root) -> dict[str, dict]:
    return {r["text"]: r for r in lines(root)}


# ----- where the name comes from -------------------------------------------------------------------


def test_a_write_carries_the_git_identity_of_the_stores_repository(store):
    identity(store.root)
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "the budget is 2400")
    (rec,) = lines(store.root)
    assert rec["author"] == ANA
    assert list(rec)[-2:] == ["vkey", "author"]  # its place in the line (docs/format.md)
    assert git_clean(store.root)


def test_memstore_author_then_the_user_config_then_git(store, tmp_path, monkeypatch):
    identity(store.root)
    conf = tmp_path / "config.toml"
    conf.write_text('author = "Bo Chen <bo@example.org>"\n', encoding="utf-8")
    monkeypatch.setenv("MEMSTORE_CONFIG", str(conf))
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "from the user config")
    git(store.root, "config", "memstore.author", "Cy <cy@example.net>")
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:01:00Z", "from git config")
    recs = by_text(store.root)
    assert recs["from the user config"]["author"] == "Bo Chen <bo@example.org>"
    assert recs["from git config"]["author"] == "Cy <cy@example.net>"


def test_no_identity_anywhere_writes_no_author(store):
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "nobody set a name")
    (rec,) = lines(store.root)
    assert "author" not in rec  # unknown, never memstore's own fallback commit identity
    assert git(store.root, "log", "-1", "--format=%an") == "memstore"
    hit = json.loads(ct("-C", store.root, "search", "nobody", "--json").stdout)["hits"][0]
    assert hit["author"] is None


def test_a_bad_configured_author_stops_the_write_and_changes_nothing(store, tmp_path, monkeypatch):
    identity(store.root)
    n = len(commits(store.root))
    git(store.root, "config", "memstore.author", "Ana\tLopez")
    proc = ct("-C", store.root, "add", "x", check=False)
    assert proc.returncode == 4
    assert "memstore.author" in proc.stderr and "control character" in proc.stderr
    git(store.root, "config", "--unset", "memstore.author")
    conf = tmp_path / "config.toml"
    conf.write_text("author = 5\n", encoding="utf-8")
    monkeypatch.setenv("MEMSTORE_CONFIG", str(conf))
    proc = ct("-C", store.root, "add", "x", check=False)
    assert (
        proc.returncode == 4
        and str(conf) in proc.stderr
        and "author must be a string" in (proc.stderr)
    )
    assert len(commits(store.root)) == n and not lines(store.root) and git_clean(store.root)


def test_imports_and_ingests_carry_the_importer_not_the_speakers(store, tmp_path):
    identity(store.root)
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        json.dumps({"ts": "2026-03-01T10:00:00Z", "role": "user", "text": "hello from bo"})
        + "\n"
        + json.dumps(
            {
                "ts": "2026-03-01T10:01:00Z",
                "role": "assistant",
                "text": "an answer",
                "author": "Someone Else <x@y.z>",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    ct("-C", store.root, "import", "jsonl", turns)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nInstall it with make.\n", encoding="utf-8")
    ct("-C", store.root, "ingest-path", docs)
    recs = by_text(store.root)
    assert recs["hello from bo"]["author"] == ANA and recs["hello from bo"]["role"] == "user"
    assert recs["an answer"]["author"] == ANA and recs["an answer"]["role"] == "assistant"
    assert recs["an answer"]["meta"]["author"] == "Someone Else <x@y.z>"  # the input's, kept
    chunks = [r for r in lines(store.root) if r["type"] == "doc"]
    assert chunks and all(r["author"] == ANA for r in chunks)


def test_a_non_string_author_in_a_log_line_is_named_by_file_and_line(store):
    identity(store.root)
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "a good line")
    (path,) = list((store.root / "log").rglob("*.jsonl"))
    bad = {**lines(store.root)[0], "id": "bad-author-line", "author": 5}
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(bad) + "\n")
    git(store.root, "commit", "-qam", "a hand-written line")
    proc = ct("-C", store.root, "fsck", check=False)
    assert proc.returncode == 1
    where = f"{path.relative_to(store.root).as_posix()}:2"
    assert f"{where}: field 'author' must be a string, not int" in proc.stdout + proc.stderr
    out = json.loads(ct("-C", store.root, "search", "good line", "--json").stdout)
    assert [h["id"] for h in out["hits"]] == [lines(store.root)[0]["id"]]  # the good line stays


# ----- shown and filtered ------------------------------------------------------------------------


def _three_writers(root) -> None:
    """An old record with no author, then two by Ana, one by Bo."""
    ct("-C", root, "add", "--ts", "2026-03-01T09:00:00Z", "old budget note, author unknown")
    identity(root)
    ct("-C", root, "add", "--ts", "2026-03-01T10:00:00Z", "Ana: the budget is 2400")
    ct("-C", root, "add", "--ts", "2026-03-01T10:01:00Z", "Ana: budget for the train")
    identity(root, "Bo Chen", "Bo@Example.org")
    ct("-C", root, "add", "--ts", "2026-03-01T10:02:00Z", "--role", "assistant", "Bo: budget ok")


def _authors(out: dict) -> list:
    return sorted(str(h["author"]) for h in out["hits"])


def test_search_shows_the_author_and_filters_by_name_or_email_in_any_case(store):
    _three_writers(store.root)
    everyone = json.loads(ct("-C", store.root, "search", "budget", "--json").stdout)
    assert _authors(everyone) == sorted([ANA, ANA, "Bo Chen <Bo@Example.org>", "None"])
    for wanted in ("ana lopez", "ANA@EXAMPLE.COM", "Ana Lopez"):
        out = json.loads(
            ct("-C", store.root, "search", "budget", "--author", wanted, "--json").stdout
        )
        assert _authors(out) == [ANA, ANA], wanted
    both = ct("-C", store.root, "search", "budget", "--author", "bo@example.org", "--author", "ana")
    assert "Ana" not in both.stdout  # "ana" is neither Ana's whole name nor her email
    assert "by Bo Chen" in both.stdout
    nobody = json.loads(
        ct("-C", store.root, "search", "budget", "--author", "lopez", "--json").stdout
    )
    assert nobody["hits"] == []
    text = ct("-C", store.root, "search", "budget", "--mode", "exact").stdout
    assert "user (text)  by Ana Lopez  score" in text
    assert "old budget note" in text  # a record without an author is shown, with no name


def test_recall_shows_and_filters_by_author(store):
    _three_writers(store.root)
    out = json.loads(
        ct("-C", store.root, "recall", "budget", "--author", "bo chen", "--json").stdout
    )
    assert [h["text"] for h in out["hits"]] == ["Bo: budget ok"]
    assert out["hits"][0]["author"] == "Bo Chen <Bo@Example.org>"
    one = ct("-C", store.root, "recall", "budget on 1 March 2026", "--author", "ana@example.com")
    assert "-- put into memory by Ana Lopez --\n" in one.stdout  # once, not on every line
    assert "] user: Ana: the budget is 2400" in one.stdout
    assert "Bo:" not in one.stdout and "old budget" not in one.stdout
    mixed = ct("-C", store.root, "recall", "budget on 1 March 2026").stdout
    assert "] user (by Ana Lopez): Ana: the budget is 2400" in mixed
    assert "] assistant (by Bo Chen): Bo: budget ok" in mixed
    assert "] user: old budget note, author unknown" in mixed and "put into memory by" not in mixed


def test_http_search_recall_and_the_page_show_and_filter_authors(store):
    from memstore.serve.http import ENDPOINTS, make_server, url_of

    _three_writers(store.root)
    server = make_server(store.root, port=0, log=False)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    base = url_of(server)

    def post(path, body):
        req = urllib.request.Request(
            base + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    try:
        hits = post("/search", {"query": "budget", "author": ["BO@example.org"]})["hits"]
        assert [h["author"] for h in hits] == ["Bo Chen <Bo@Example.org>"]
        got = post("/recall", {"question": "budget", "author": ["ana lopez"]})["hits"]
        assert {h["author"] for h in got} == {ANA} and len(got) == 2
        with urllib.request.urlopen(base + "/view/search?query=budget&k=10", timeout=30) as r:
            page = json.loads(r.read())["hits"]
        assert sorted(str(h["author"]) for h in page) == _authors({"hits": page})
        assert ANA in {h["author"] for h in page}
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)
    for path in ("/search", "/recall"):
        assert "author" in [p.name for p in ENDPOINTS[path].params]


def test_mcp_search_and_recall_take_author(store):
    pytest.importorskip("mcp")
    from test_mcp import _data, _session

    _three_writers(store.root)

    async def main():
        # only calls in the session: a failed assert inside it would leave the client waiting
        async with _session(store.root) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            calls = [
                await s.call_tool("search", {"query": "budget", "author": ["ana"]}),
                await s.call_tool("search", {"query": "budget", "author": ["Ana Lopez"]}),
                await s.call_tool("recall", {"question": "budget", "author": ["bo@example.org"]}),
            ]
        return tools, calls

    tools, (nobody, ana, bo) = anyio.run(main)
    assert "author" in tools["search"].input_schema["properties"]
    assert "author" in tools["recall"].input_schema["properties"]
    assert _data(nobody)["hits"] == []  # "ana" is neither her whole name nor her email
    found = _data(ana)["hits"]
    assert {h["author"] for h in found} == {ANA} and len(found) == 2
    assert [h["text"] for h in _data(bo)["hits"]] == ["Bo: budget ok"]


# ----- round trips -------------------------------------------------------------------------------


def test_authors_survive_a_plain_git_merge_gc_and_a_rebuilt_index(store, tmp_path):
    identity(store.root)
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "written by ana")
    other = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(store.root), str(other)], check=True)
    identity(other, "Bo Chen", "bo@example.org")
    ct("-C", other, "add", "--ts", "2026-03-01T11:00:00Z", "written by bo")
    ct("-C", store.root, "add", "--ts", "2026-03-01T12:00:00Z", "written by ana again")
    git(store.root, "pull", "-q", "--no-rebase", "--no-edit", str(other), "main")
    ct("-C", store.root, "gc")
    ct("-C", store.root, "index", "-B")
    want = {
        "written by ana": ANA,
        "written by bo": "Bo Chen <bo@example.org>",
        "written by ana again": ANA,
    }
    assert {t: r["author"] for t, r in by_text(store.root).items()} == want
    out = json.loads(ct("-C", store.root, "search", "written", "--json", "-k", "5").stdout)
    assert {h["text"]: h["author"] for h in out["hits"]} == want
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]


# ----- signed commits ----------------------------------------------------------------------------


def _key(folder, name):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(folder / name)],
        check=True,
    )
    return folder / name


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_ct_log_and_the_page_say_whether_git_verifies_a_signed_commit(store, tmp_path):
    from memstore.serve.web import views
    from memstore.store import Store

    identity(store.root)
    trusted, stranger = _key(tmp_path, "trusted"), _key(tmp_path, "stranger")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"ana@example.com {(tmp_path / 'trusted.pub').read_text()}")
    for key, value in (
        ("gpg.format", "ssh"),
        ("user.signingkey", str(trusted)),
        ("commit.gpgsign", "true"),
        ("gpg.ssh.allowedSignersFile", str(allowed)),
    ):
        git(store.root, "config", key, value)
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "signed by a trusted key")
    git(store.root, "config", "user.signingkey", str(stranger))
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:01:00Z", "signed by a stranger's key")
    git(store.root, "config", "commit.gpgsign", "false")
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:02:00Z", "not signed")

    # git itself agrees: the write signed its commit, and only the trusted key verifies
    assert subprocess.run(["git", "-C", store.root, "verify-commit", "HEAD~2"]).returncode == 0
    assert subprocess.run(["git", "-C", store.root, "verify-commit", "HEAD~1"]).returncode != 0

    log = json.loads(ct("-C", store.root, "log", "-n", "3", "--json").stdout)
    unsigned, stranger_sig, trusted_sig = (e["signature"] for e in log)
    assert unsigned is None
    assert trusted_sig["verified"] is True and trusted_sig["signer"] == "ana@example.com"
    assert stranger_sig["verified"] is False and stranger_sig["status"] == "U"
    assert {e["author"] for e in log} == {"Ana Lopez"}
    assert {e["author_email"] for e in log} == {"ana@example.com"}
    text = ct("-C", store.root, "log", "-n", "3").stdout.splitlines()
    assert text[0].endswith("Ana Lopez")
    assert "signed, NOT verified: the key is not in the allowed signers" in text[1]
    assert text[2].endswith("Ana Lopez, signed, verified (ana@example.com)")

    page = views.history(Store.open(store.root), {"n": 3})["commits"]
    assert [c["signature"] and c["signature"]["verified"] for c in page] == [None, False, True]

    # without an allowed signers file git cannot check: still signed, not verified
    git(store.root, "config", "--unset", "gpg.ssh.allowedSignersFile")
    log = json.loads(ct("-C", store.root, "log", "-n", "3", "--json").stdout)
    assert [e["signature"] and e["signature"]["status"] for e in log] == [None, "E", "E"]


@pytest.mark.parametrize("schema", ["2", None])
def test_an_index_from_before_authors_is_rebuilt_not_called_damaged(store, schema):
    from memstore.sqlitedb import sqlite3

    identity(store.root)
    ct("-C", store.root, "add", "--ts", "2026-03-01T10:00:00Z", "indexed before authors")
    db = store.root / ".memstore" / "index.db"
    conn = sqlite3.connect(db)  # the index as an earlier memstore left it
    for col in ("author_name", "author_email"):
        conn.execute(f"ALTER TABLE records DROP COLUMN {col}")
    if schema is None:
        conn.execute("DELETE FROM meta WHERE key = 'schema'")
    else:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (schema,))
    conn.commit()
    conn.close()
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]
    out = json.loads(
        ct("-C", store.root, "search", "indexed", "--author", "ana lopez", "--json").stdout
    )
    assert [h["author"] for h in out["hits"]] == [ANA]


def test_a_stamped_record_is_in_line_order_so_its_line_is_written_without_a_copy(
    store, monkeypatch
):
    """A write stamps hash, vkey and author after the input's fields and moves the fields a line
    holds after them (source, supersedes, meta, scope) behind them: the record is in the line's
    order (recordfmt.ordered gives it back as it is), and its line is the one a copy in that order
    would write."""
    from memstore.format import record as recordfmt

    from memstore.store import Store

    identity(store.root)
    store = Store.open(store.root)  # (the identity set after it was made)
    monkeypatch.setattr(
        recordfmt, "ordered", lambda rec, _was=recordfmt.ordered: _checked(rec, _was)
    )
    raw = {
        "ts": "2026-03-01T10:00:00Z",
        "role": "user",
        "text": "the budget is 2400",
        "source": "notes.md",
        "supersedes": ["01jabc"],
        "scope": "private",
        "tag": "kept in meta",
    }
    store.write([store.normalize(raw, derive_id=True)], "add", secrets="allow")
    (rec,) = lines(store.root)
    keys = list(rec)
    assert keys == [k for k in recordfmt.FIELD_ORDER if k in rec]
    assert keys.index("author") < keys.index("source") < keys.index("meta") < keys.index("scope")


def _checked(rec, ordered):
    got = ordered(rec)
    assert got is rec, list(rec)
    return got
