"""A fresh CLI process imports only what its command needs (cold start of ct search, add, where)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import modules_after, write_turns

HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "onnxruntime",
    "onnx",
    "faiss",
    "git",
    "sqlite_utils",
)


def _imported(args: list[str]) -> list[str]:
    return modules_after(args, HEAVY)


@pytest.mark.parametrize(
    "command", [["search", "budget"], ["add", "the budget is fine"], ["where"]]
)
def test_hash_store_commands_import_no_heavy_library(store, command):
    write_turns(store, [("2026-01-02T10:00:00Z", "user", "what about the budget", "s1", "me")])
    store.index()
    expected = (
        ["git"] if command[0] == "add" else []
    )  # a write commits through gitpython; reads run no git
    assert _imported(["-C", str(store.root), *command]) == expected


def test_a_search_reads_no_writer_code(store):
    """A search weighs changelog chunks by their path (format/record.py doc_kind); it must not load
    the ingest walker for that (about 30 ms of imports per `ct search`)."""
    write_turns(store, [("2026-01-02T10:00:00Z", "user", "what about the budget", "s1", "me")])
    store.index()
    writers = ("memstore.ingest.walk", "memstore.ingest.path", "memstore.ingest.chunk")
    assert modules_after(["-C", str(store.root), "search", "budget"], writers) == []


def test_the_program_leaves_fast_with_its_exit_status_and_all_its_output(store, tmp_path):
    """`ct` (memstore.cli.run) skips interpreter teardown: what it printed still arrives whole
    through a pipe, an error keeps its exit status, and atexit handlers still run."""
    write_turns(
        store,
        [
            (f"2026-01-02T10:{i:02d}:00Z", "user", f"budget line {i} " * 20, "s1", "me")
            for i in range(40)
        ],
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memstore",
            "-C",
            str(store.root),
            "search",
            "budget",
            "-k",
            "40",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    import json

    assert (
        len(json.loads(proc.stdout)["hits"]) == 40
    )  # 40 hits of ~600 characters: the pipe got all of it

    missing = tmp_path / "no-store-here"
    missing.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "memstore", "-C", str(missing), "where"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3 and "Not a memory store" in proc.stderr, proc.stderr

    marker = tmp_path / "atexit-ran"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes'))\n"
        "from memstore.cli import run\n"
        "run(['--version'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("ct"), proc.stderr
    assert marker.read_text() == "yes"
