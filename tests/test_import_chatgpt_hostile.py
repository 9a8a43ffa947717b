"""ChatGPT exports from strangers: a conversation of the wrong shape is skipped with a note naming
the file and the conversation, the rest imported; a file that cannot be read at all (a zip bomb, an
encrypted or corrupt zip, a FIFO, a device, a file over the cap) is refused with exit 4, naming it,
the store unchanged. Never a traceback, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import CT, ct, git_clean, log_records, make_store
from memstore.ingest import import_chatgpt
from test_hostile_input import _head, _refused

HUNG = 60  # seconds: far more than any of these takes; only a hang reaches it


def _conv(cid: str) -> dict:
    """Two user messages, `hello <cid>` then `bye <cid>`, the second the current node."""
    a, b = f"{cid}-0", f"{cid}-1"

    def msg(node: str, text: str) -> dict:
        return {
            "id": node,
            "author": {"role": "user"},
            "create_time": 1.7e9,
            "content": {"content_type": "text", "parts": [text]},
        }

    return {
        "id": cid,
        "title": "t",
        "mapping": {
            a: {"message": msg(a, f"hello {cid}"), "parent": None, "children": [b]},
            b: {"message": msg(b, f"bye {cid}"), "parent": a, "children": []},
        },
        "current_node": b,
    }


def _texts(root) -> list[str]:
    return sorted(r["text"] for r in log_records(root))


def _ct_bounded(*args) -> subprocess.CompletedProcess:
    """`ct ARGS` in a process that cannot hang the suite."""
    try:
        return subprocess.run([*CT, *map(str, args)], capture_output=True, text=True, timeout=HUNG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ct {' '.join(map(str, args))} hung (killed after {HUNG} s)")


# ----- a conversation of the wrong shape: skipped, named; the others imported --------------------


def _author(c):
    c["mapping"]["bad-0"]["message"]["author"] = "user"


def _content(c):
    c["mapping"]["bad-0"]["message"]["content"] = ["x"]


def _metadata(c):
    c["mapping"]["bad-0"]["message"]["metadata"] = [1]


def _content_type(c):
    c["mapping"]["bad-0"]["message"]["content"]["content_type"] = ["text"]


def _node(c):
    c["mapping"]["bad-0"] = [1]


def _parent(c):
    c["mapping"]["bad-1"]["parent"] = ["x"]


def _current_node(c):
    c["current_node"] = {"a": 1}


def _children(c):
    c["current_node"] = None
    c["mapping"]["bad-0"]["children"] = 5


def _children_loop(c):
    c["current_node"] = None
    c["mapping"]["bad-1"]["children"] = ["bad-0"]


def _own_parent(c):
    c["mapping"]["bad-1"]["parent"] = "bad-1"


def _parent_loop(c):
    c["mapping"]["bad-0"]["parent"] = "bad-1"


@pytest.mark.parametrize(
    "spoil, why",
    [
        (_author, "message bad-0's author is a string, not an object"),
        (_content, "message bad-0's content is a list, not an object"),
        (_metadata, "message bad-0's metadata is a list, not an object"),
        (_content_type, "message bad-0's content_type is a list, not a name"),
        (_node, "message node bad-0 is a list, not an object"),
        (_parent, "message bad-1's parent is a list, not a message id"),
        (_current_node, "current_node is an object, not a message id"),
        (_children, "message bad-0's children are the number 5, not a list of ids"),
        (_children_loop, "the messages' children links loop (bad-0 -> bad-1 -> bad-0)"),
        (_own_parent, "message bad-1 is its own parent (a loop)"),
        (_parent_loop, "the messages' parent links loop (bad-1 -> bad-0 -> bad-1)"),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_a_conversation_of_the_wrong_shape_is_skipped_and_named(tmp_path, spoil, why):
    root = tmp_path / "store"
    make_store(root)
    f = tmp_path / "conversations.json"
    bad = _conv("bad")
    spoil(bad)
    f.write_text(json.dumps([_conv("first"), bad, _conv("last")]))
    proc = _ct_bounded("-C", root, "import", "chatgpt", f)  # a loop must not hang the suite
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"skipped {f}: conversation 2 (bad): {why}" in proc.stderr, proc.stderr
    assert "not in the export" not in proc.stderr, proc.stderr  # a loop is said to be one
    assert _texts(root) == ["bye first", "bye last", "hello first", "hello last"]
    assert git_clean(root)


def test_attachments_that_are_not_a_list_are_ignored(store, tmp_path):
    f = tmp_path / "conversations.json"
    odd = _conv("odd")
    odd["mapping"]["odd-0"]["message"]["metadata"] = {"attachments": 5}
    odd["mapping"]["odd-1"]["message"]["metadata"] = {"attachments": [{"name": 7}, "x", None]}
    f.write_text(json.dumps([odd, _conv("ok")]))
    proc = ct("-C", store.root, "import", "chatgpt", f)
    assert "skipped" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert _texts(store.root) == ["bye odd", "bye ok", "hello odd", "hello ok"]
    assert not any("attachments" in r for r in log_records(store.root))


# ----- a file that cannot be read at all: refused, named, nothing changed ------------------------


def _zip(path, text: str = "", compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr("conversations.json", text or json.dumps([_conv("z")]) + " " * 4000)
    return path


def _patch(path, local_at: int, central_at: int, value: bytes, mask: bool = False):
    """Overwrite (or OR into) a field of the first member's local and central headers."""
    data = bytearray(path.read_bytes())
    for start, at in ((data.find(b"PK\x03\x04"), local_at), (data.find(b"PK\x01\x02"), central_at)):
        for i, byte in enumerate(value):
            data[start + at + i] = data[start + at + i] | byte if mask else byte
    path.write_bytes(bytes(data))


def _bomb(path):
    """A small zip whose conversations.json says it is 3 GiB uncompressed."""
    _patch(_zip(path), 22, 24, (3 * 1024**3).to_bytes(4, "little"))


def _encrypted(path):
    _patch(_zip(path), 6, 8, b"\x01", mask=True)


def _unknown_method(path):
    _patch(_zip(path), 8, 10, (99).to_bytes(2, "little"))


def _corrupt_deflate(path):
    _zip(path)
    data = bytearray(path.read_bytes())
    data[data.find(b"PK\x03\x04") + 30 + len("conversations.json")] = 0xFF  # block type 3: invalid
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "build, words",
    [
        (_bomb, "its conversations.json (uncompressed) is 3.0 GiB, over the 2.0 GiB cap"),
        (_encrypted, "cannot read the export (its conversations.json is encrypted)"),
        (_unknown_method, "cannot read the export (That compression method is not supported)"),
        (_corrupt_deflate, "cannot read the export (Error -3 while decompressing data"),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_a_zip_that_cannot_be_read_is_refused(store, tmp_path, build, words):
    f = tmp_path / "export.zip"
    build(f)
    assert f.stat().st_size < 100_000  # the test itself stays small
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "chatgpt", f, check=False),
        store.root,
        before,
        f"{f}: ",
        words,
    )


def test_conversations_json_over_the_cap_is_refused_plain_or_zipped(store, tmp_path, monkeypatch):
    monkeypatch.setattr(import_chatgpt, "MAX_EXPORT_BYTES", 2048)
    small = json.dumps([_conv("small")])
    big = "[" + " " * 3000 + "]"
    assert len(small) < 2048 and import_chatgpt.read_chatgpt(_zip(tmp_path / "fits.zip", small))
    plain = tmp_path / "conversations.json"
    plain.write_text(big)
    for f, what in (
        (_zip(tmp_path / "export.zip", big), "its conversations.json"),
        (plain, "the file"),
    ):
        before = _head(store.root)
        proc = ct("-C", store.root, "import", "chatgpt", f, check=False)
        _refused(proc, store.root, before, f"{f}: {what}", "is 2.9 KiB, over the 2.0 KiB cap")


def _read_in_a_process(path, tmp_path) -> subprocess.CompletedProcess:
    """read_chatgpt(path) in a process with 1 GiB of address space and a time limit: a FIFO or a
    device must not hang the suite or fill its memory."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from memstore.errors import FormatError\n"
        "from memstore.ingest.import_chatgpt import read_chatgpt\n"
        "try:\n    read_chatgpt(sys.argv[1])\n"
        "except FormatError as exc:\n    print(exc)\n    sys.exit(4)\n"
    )
    try:
        return subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            timeout=HUNG,
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path} hung (killed after {HUNG} s)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_device_is_refused_without_reading_it(store, tmp_path):
    fifo = tmp_path / "conversations.json"
    os.mkfifo(fifo)
    folder = tmp_path / "export"
    folder.mkdir()
    os.mkfifo(folder / "conversations.json")
    for path, where, kind in (
        (fifo, fifo, "a FIFO"),
        (folder, folder / "conversations.json", "a FIFO"),  # the export's folder
        ("/dev/zero", "/dev/zero", "a character device"),
    ):
        proc = _read_in_a_process(path, tmp_path)
        assert proc.returncode == 4, (path, proc.returncode, proc.stdout, proc.stderr)
        assert f"{where}: cannot read the export: not a regular file ({kind})" in proc.stdout
    before = _head(store.root)
    for path in (fifo, "/dev/zero"):  # the command line, end to end
        proc = _ct_bounded("-C", store.root, "import", "chatgpt", path)
        assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{path}: " in proc.stderr.splitlines()[0], proc.stderr
        assert _head(store.root) == before and git_clean(store.root)
