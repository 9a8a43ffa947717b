"""A fresh CLI process imports only what its command needs (cold start of ct search, add, where)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import write_turns

HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime", "onnx", "faiss", "git", "sqlite_utils")


def _imported(args: list[str]) -> list[str]:
    code = (
        "import sys\nfrom memstore.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout.strip().splitlines()[-1])  # a list literal printed by the child


@pytest.mark.parametrize("command", [["search", "budget"], ["add", "the budget is fine"], ["where"]])
def test_hash_store_commands_import_no_heavy_library(store, command):
    write_turns(store, [("2026-01-02T10:00:00Z", "user", "what about the budget", "s1", "me")])
    store.index()
    expected = ["git"] if command[0] == "add" else []  # a write commits through gitpython; reads run no git
    assert _imported(["-C", str(store.root), *command]) == expected
