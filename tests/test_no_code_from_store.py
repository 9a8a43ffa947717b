"""A copied store runs no code (issue 26, A2): nothing in the store, its `.memstore/` folder or the
user's embedding cache is read by a loader that can execute what it reads, and a planted or
damaged cache is ignored and rebuilt."""

from __future__ import annotations

import json
from memstore.sqlitedb import sqlite3
import pickle
import re
import threading
import urllib.request
from pathlib import Path

from conftest import ct, git_clean, make_store
from conftest_openai import openai_server  # noqa: F401  (fixture)
from memstore.format import tree as treefmt
from memstore.serve.http import make_server, url_of

PKG = Path(__file__).resolve().parent.parent / "memstore"
# Loaders that run code found in their input, and the calls that switch a safe loader to one.
UNSAFE = re.compile(
    r"\bimport (pickle|marshal|shelve|dill|cloudpickle|joblib)\b|\bfrom (pickle|marshal|shelve) import"
    r"|\b(pickle|marshal|dill|joblib)\.loads?\(|\bshelve\.open\(|\btorch\.load\(|allow_pickle\s*=\s*True"
    r"|(?<![\w.])eval\(|(?<![\w.])exec\(|\byaml\.(unsafe_)?load\(|\bUnpickler\b"
)


def test_the_package_has_no_loader_that_runs_what_it_reads():
    found = [
        f"{p.relative_to(PKG.parent)}:{n}: {line.strip()}"
        for p in sorted(PKG.rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if UNSAFE.search(line.split("#", 1)[0])
    ]
    assert found == []


def test_the_pattern_finds_what_it_looks_for():
    for line in (
        "import pickle",
        "data = pickle.load(fh)",
        "np.load(p, allow_pickle=True)",
        "eval(s)",
        "torch.load(f)",
    ):
        assert UNSAFE.search(line), line
    for line in ("ast.literal_eval(s)", "self.eval(x)", "np.load(p)", "json.loads(s)"):
        assert not UNSAFE.search(line), line


class _Payload:
    """Unpickling this creates the marker file: proof that a loader ran code from the cache."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _cache_files(st, embed_cache: Path) -> list[Path]:
    meta = st.root / ".memstore"
    files = [p for p in meta.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    files += [p for p in embed_cache.parent.glob(embed_cache.name + "*") if p.is_file()]
    return sorted(
        set(files) | {meta / "tree-cache.pickle"}
    )  # what older versions kept: a copied store may have it


def _plant(files: list[Path], payload: bytes) -> None:
    for p in files:
        p.write_bytes(payload)


def _page_tree(root) -> dict:
    server = make_server(root, port=0, log=False)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        req = urllib.request.Request(
            url_of(server) + "/view/tree", headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)


def test_planted_payloads_in_every_cache_run_nothing(tmp_path, openai_server, monkeypatch):  # noqa: F811
    embed_cache = tmp_path / "user-cache" / "embeddings.sqlite"
    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(embed_cache))
    st = make_store(
        tmp_path / "s", embedder="openai"
    )  # its vectors pass through the user's embedding cache
    for text in (
        "We planned the lake cabin trip for June",
        "The budget is forty thousand",
        "Sarah is allergic",
    ):
        ct("-C", st.root, "add", text)
    for args in (
        ["search", "cabin"],
        ["tree"],
        ["context", "budget"],
        ["recall", "today"],
        ["where"],
    ):
        ct("-C", st.root, *args)
    _page_tree(st.root)
    files = _cache_files(st, embed_cache)
    names = {p.name for p in files}
    assert {treefmt.CACHE, "index.db", embed_cache.name} <= names, names
    marker = tmp_path / "PAYLOAD-RAN"
    payload = pickle.dumps(_Payload(marker))
    runs = [
        ["tree"],
        ["add", "The cabin has a wood stove"],
        ["context", "cabin"],
        ["search", "cabin"],
    ]
    for args in runs:
        _plant(files, payload)
        proc = ct("-C", st.root, *args, check=False)
        assert not marker.exists(), f"ct {' '.join(args)} ran code from a planted cache"
        assert proc.returncode == 0, proc.stderr  # a planted cache is ignored and rebuilt
    _plant(files, payload)
    view = _page_tree(st.root)
    assert not marker.exists(), "the page's tree view ran code from a planted cache"
    assert view["topics"], "the tree was replayed from the shards instead"
    conn = sqlite3.connect(st.root / ".memstore" / treefmt.CACHE)
    version = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0]
    conn.close()
    assert (
        version == treefmt.CACHE_VERSION
        and not (st.root / ".memstore" / treefmt.OLD_CACHE).exists()
    )
    assert git_clean(st.root)


def test_a_well_formed_but_wrong_tree_cache_is_rebuilt(tmp_path):
    """A cache database with the right version and fingerprint but values of the wrong types, or
    a schema this code did not make (a trigger, a missing table), is damage, not a tree."""
    st = make_store(tmp_path / "s")
    ct("-C", st.root, "add", "A turn about the lake cabin")
    want = treefmt.read(st.root)
    path = st.root / ".memstore" / treefmt.CACHE
    for bad in (
        "UPDATE topics SET records = '[1, 2]'",
        "UPDATE topics SET records = '{\"a\": 1}'",
        "UPDATE topics SET name = NULL",
        "UPDATE topics SET parent = 3",
        "UPDATE meta SET value = '[1, 2]' WHERE key = 'problems'",
        "UPDATE meta SET value = 4 WHERE key = 'current'",
        "UPDATE meta SET value = 'tnowhere' WHERE key = 'current'",
        "INSERT INTO gone VALUES ('t1', '\"x\"')",
        "INSERT INTO archived VALUES (x'00')",
        "CREATE TRIGGER t AFTER UPDATE ON topics BEGIN DELETE FROM placed; END",
        "DROP TABLE placed",
    ):
        treefmt.read(st.root)
        conn = sqlite3.connect(path)
        conn.execute(bad)
        conn.commit()
        conn.close()
        got = treefmt.read(st.root)
        assert got.topic_of() == want.topic_of() and got.current == want.current, bad
        assert got.gone == want.gone and got.archived == want.archived, bad
    path.write_bytes(b"\xff\xfe not a database")
    assert treefmt.read(st.root).topic_of() == want.topic_of()
    ct("-C", st.root, "add", "Another turn about the lake cabin")  # a write after it is fine
    assert len(treefmt.read(st.root).topic_of()) == 2


def test_a_planted_write_journal_touches_nothing_outside_the_store(tmp_path):
    """A copied store's `.memstore/write-journal.json` looks like a crashed writer's: the next read
    rolls it back. The files it names must be the store's own, or a planted journal would replace
    the user's ~/.bashrc with a file from the copy (code on the next shell) or delete any file."""
    st = make_store(tmp_path / "home" / "stores" / "s")
    ct("-C", st.root, "add", "A turn about the lake cabin")
    home = tmp_path / "home"
    bashrc, victim = home / ".bashrc", home / "thesis.txt"
    bashrc.write_text("# the user's own shell start-up\n")
    victim.write_text("years of work\n")
    (st.root / "planted-bashrc").write_text("touch PWNED\n")  # came with the copy
    meta = st.root / ".memstore"
    journal = {
        "pid": 1,
        "started": 0,
        "head": None,
        "appended": {},
        "rewritten": {"../../.bashrc": True, str(victim): False, "../../thesis.txt": False},
    }
    (meta / "write-journal.json").write_text(json.dumps(journal))
    kept = meta / "write-journal-rewrites"
    kept.mkdir()
    (st.root / ".bashrc").write_text(
        "touch PWNED\n"
    )  # kept / "../../.bashrc" is the store's .bashrc
    for args in (["search", "cabin"], ["fsck", "--repair"]):
        ct("-C", st.root, *args, check=False)
        assert bashrc.read_text() == "# the user's own shell start-up\n"
        assert victim.read_text() == "years of work\n"
