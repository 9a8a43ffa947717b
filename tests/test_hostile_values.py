"""Hostile values in a store's committed files (what a `git pull` can bring): JSON nested too deep,
giant numbers, NaN, fields of the wrong type, bad pack manifests, a folder where a day log goes,
giant or deep memstore.toml values, damaged markers, tombstones and purges, and .gitattributes that
make git rewrite the store's bytes. Each gives a message naming the file (and line), never a
traceback; `ct fsck` names it; committed records stay intact, and writes work again once it is
gone (docs/format.md, "Damage")."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import commits, ct, git_clean, make_store

DEEP = "[" * 100_000 + "]" * 100_000
GIANT = "9" * 5000
TEXTS = ("cap the trip budget at 2400 euros", "Hotels in Lisbon", "train to Porto")


def git(root, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@x", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def commit(root, message="hostile", *paths: str) -> None:
    git(root, "add", "-A", *(paths or ["."]))
    git(root, "commit", "-qm", message, "--no-verify")


@pytest.fixture
def base(tmp_path) -> Path:
    """A store with three records and a marker, all committed."""
    root = tmp_path / "s"
    make_store(root)
    for text in TEXTS:
        ct("-C", root, "add", text)
    ct("-C", root, "mark", "working on budget")
    return root


def day_log(root) -> Path:
    (path,) = (root / "log").rglob("*.jsonl")
    return path


def committed_lines(root) -> dict[str, bytes]:
    """Every committed day log's bytes at HEAD."""
    names = git(root, "ls-tree", "-r", "--name-only", "HEAD", "--", "log").split()
    return {
        n: subprocess.run(["git", "-C", str(root), "show", f"HEAD:{n}"], capture_output=True).stdout
        for n in names
    }


def fsck_names(root, *words) -> str:
    proc = ct("-C", root, "fsck", check=False)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == 1 and "damaged" in out, out
    for w in words:
        assert w in out, (w, out)
    return out


def still_writes(root, text="a new note after the hostile line") -> None:
    """A write works, the committed records are intact, and the new record is found."""
    before = committed_lines(root)
    ct("-C", root, "add", text)
    after = committed_lines(root)
    for name, data in before.items():
        assert after[name].startswith(data), name  # nothing committed was lost or changed
    hits = ct("-C", root, "search", "--json", text).stdout
    assert text in hits
    assert git_clean(root)


def append_line(root, line: str, path: Path | None = None) -> str:
    """Append a committed line to the store's day log; `FILE:LINE` of it."""
    path = path or day_log(root)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    commit(root)
    n = len(path.read_bytes().splitlines())
    return f"{path.relative_to(root).as_posix()}:{n}"


# ----- day-log lines ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, why",
    [
        (DEEP, "nested too deep"),
        ('{"ts":1' + GIANT + "}", "more than 4,300 digits"),
    ],
)
def test_an_unreadable_day_log_line_is_named_everywhere(base, line, why):
    where = append_line(base, line)
    for args in (("search", "budget"), ("context", "budget"), ("where",), ("tree",)):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert where in ct("-C", base, "search", "budget").stderr
    fsck_names(base, f"{where}: ", why)
    still_writes(base)


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("actor", {"x": 1}, "field 'actor' must be a string, not an object"),
        ("session", ["a"], "field 'session' must be a string, not a list"),
        ("type", ["text"], "field 'type' must be one of"),
        ("id", None, "field 'id' must be 1-200 printable characters, not null"),
        ("id", 12345, "field 'id' must be 1-200 printable characters, not a number"),
        ("model", float("nan"), "holds NaN"),
        ("session", float("inf"), "holds Infinity"),
        ("scope", "public", "field 'scope' must be private"),
        ("supersedes", "x", "field 'supersedes' must be a list"),
        ("meta", 5, "field 'meta' must be an object"),
    ],
)
def test_a_record_field_of_the_wrong_type_is_a_damaged_line(base, field, value, why):
    path = day_log(base)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    train = recs[2]["id"]
    recs[0][field] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    commit(base)
    where = f"{path.relative_to(base).as_posix()}:1"
    for args in (("search", "budget"), ("recall", "budget"), ("where",), ("context", "budget")):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    proc = ct("-C", base, "search", "--json", "budget hotels train")
    assert where in proc.stderr
    hits = json.loads(proc.stdout)
    ids = [h.get("id") for h in (hits["hits"] if isinstance(hits, dict) else hits)]
    assert train in ids and "None" not in ids and 12345 not in ids
    fsck_names(base, f"{where}: {why}")
    still_writes(base)


def test_gc_and_forget_keep_hostile_lines_and_work_around_them(base):
    path = day_log(base)
    train = json.loads(path.read_text().splitlines()[2])["id"]
    bad = [DEEP, '{"id":[1],"text":"x","ts":"2026-01-01T00:00:00Z","role":"user","type":"text"}']
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in bad))
    commit(base)
    for args in (("gc",), ("forget", train)):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    kept = path.read_text().splitlines()
    assert kept[-2:] == bad and not any(train in line for line in kept)  # nothing else lost
    fsck_names(base, "nested too deep", "field 'id'")
    still_writes(base)


# ----- packs --------------------------------------------------------------------------------------


def _pack(manifest: str) -> bytes:
    body = manifest.encode()
    return struct.pack("<iiiiif8s", -1, -1, len(body), 13, 0, 1.0, b"\0" * 8) + body


@pytest.mark.parametrize(
    "manifest, why",
    [
        (
            '{"pack":3,"nonce":"000000000000000000000000","day":"x","dim":384,"records":5}',
            "'records' is not a list",
        ),
        ('{"pack":3,"records":' + DEEP + "}", "nested too deep"),
    ],
)
def test_a_hostile_pack_manifest_is_named(base, manifest, why):
    folder = next((base / "packs").glob("*/*"))
    data = _pack(manifest)
    path = folder / (hashlib.sha256(data).hexdigest() + ".is")
    path.write_bytes(data)
    commit(base)
    rel = path.relative_to(base).as_posix()
    proc = ct("-C", base, "search", "budget", check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert rel in proc.stderr
    fsck_names(base, rel, why)
    proc = ct("-C", base, "gc", check=False)
    assert "Traceback" not in proc.stderr and proc.returncode != 1, proc.stderr
    still_writes(base)


def test_a_folder_named_like_a_day_log_is_named_and_skipped(base):
    folder = base / "log" / "2099" / "2099-01-02.jsonl"
    folder.mkdir(parents=True)
    (folder / "x").write_text("x\n")
    commit(base)
    for args in (("search", "budget"), ("context", "budget")):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    fsck_names(base, "log/2099/2099-01-02.jsonl")
    still_writes(base)


# ----- memstore.toml ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda t: t.replace("dim = 384", "dim = 99999999999999999999999"), "[embedder] dim"),
        (lambda t: t.replace("dim = 384", "dim = 2000000000"), "from 1 to 65536"),
        (lambda t: t + "deep = " + DEEP + "\n", "nested too deep"),
        (lambda t: t + "big = 1" + GIANT + "\n", "memstore.toml"),
        (
            lambda t: t.replace("format_version = 3", "format_version = 3.0"),
            "'format_version' must be a whole number, not 3.0",
        ),
    ],
)
def test_a_hostile_memstore_toml_stops_every_command_with_its_name(base, edit, why):
    toml = base / "memstore.toml"
    toml.write_text(edit(toml.read_text()))
    commit(base)
    head = commits(base)
    for args in (("search", "x"), ("add", "y"), ("fsck",), ("where",)):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 4, (args, proc.stdout, proc.stderr)
        assert "memstore.toml" in proc.stderr and why in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert commits(base) == head and git_clean(base)
    git(base, "revert", "--no-edit", "HEAD")
    still_writes(base)


# ----- the tree -----------------------------------------------------------------------------------


@pytest.mark.parametrize("line, why", [(DEEP, "nested too deep"), ("[1" + GIANT + "]", "digits")])
def test_a_hostile_tree_line_is_skipped_and_named(base, line, why):
    shards = sorted((base / "tree").rglob("*.jsonl"))
    assert shards
    where = append_line(base, line, shards[0])
    for args in (("tree",), ("context", "budget"), ("search", "budget")):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    fsck_names(base, where, why)
    still_writes(base)


def test_a_deep_format_1_tree_json_is_named(base):
    git(base, "rm", "-rq", "tree")
    (base / "tree.json").write_text('{"format": 1, "topics": ' + DEEP + "}\n")
    commit(base)
    proc = ct("-C", base, "tree", check=False)
    assert "Traceback" not in proc.stderr and proc.returncode == 4, proc.stderr
    assert "tree.json" in proc.stderr and "nested too deep" in proc.stderr
    fsck_names(base, "tree.json", "nested too deep")


# ----- markers, tombstones, purges -------------------------------------------------------------


@pytest.mark.parametrize(
    "line, why",
    [(DEEP, "nested too deep"), ('{"id":5,"ts":7,"text":["a"],"status":"open"}', "'id'")],
)
def test_a_damaged_marker_line_is_named_by_where_mark_and_fsck(base, line, why):
    where = append_line(base, line, base / "markers.jsonl")
    for args in (("where",), ("mark", "next step")):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 4 and where in proc.stderr and why in proc.stderr, proc.stderr
    assert git_clean(base)
    fsck_names(base, f"{where}: ")
    still_writes(base)
    git(base, "revert", "--no-edit", "HEAD~1")  # the marker line goes: marking works again
    ct("-C", base, "mark", "next step")


@pytest.mark.parametrize(
    "line, why",
    [(DEEP, "nested too deep"), ('{"id":5}', "'id'"), ("[1,2]", "JSON object")],
)
def test_a_damaged_tombstone_is_named_and_hides_nothing(base, line, why):
    where = append_line(base, line, base / "forgotten.jsonl")
    for args in (("search", "budget"), ("where",), ("context", "budget"), ("tree",)):
        proc = ct("-C", base, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert "budget" in ct("-C", base, "search", "budget").stdout
    fsck_names(base, f"{where}: ", why)
    still_writes(base)


@pytest.mark.parametrize(
    "line, why", [(DEEP, "nested too deep"), ('{"commits":5}', "'commits' must be a list")]
)
def test_a_damaged_purge_line_is_named_by_fsck(base, line, why):
    where = append_line(base, line, base / "purged-history.jsonl")
    fsck_names(base, f"{where}: ", why)
    still_writes(base)


# ----- .gitattributes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attribute",
    ["working-tree-encoding=UTF-16LE", "filter=evil", "eol=crlf", "text", "ident"],
)
def test_gitattributes_that_rewrite_store_bytes_stop_writes(base, attribute):
    attrs = base / ".gitattributes"
    own = attrs.read_text()
    assert ct("-C", base, "fsck").returncode == 0  # the store's own attributes are fine
    lines = own.splitlines()
    n = next(i for i, x in enumerate(lines, 1) if x.startswith("log/"))
    lines[n - 1] += " " + attribute
    attrs.write_text("\n".join(lines) + "\n")
    commit(base, "hostile", ".gitattributes")  # git would re-encode the logs on their next add
    head = commits(base)
    proc = ct("-C", base, "add", "a note", check=False)
    assert proc.returncode == 4 and f".gitattributes:{n}:" in proc.stderr, proc.stderr
    assert attribute in proc.stderr
    assert commits(base) == head and git_clean(base)
    fsck_names(base, f".gitattributes:{n}: ")
    attrs.write_text(own)
    commit(base, "drop the attribute", ".gitattributes")
    still_writes(base)
