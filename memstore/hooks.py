"""Git hook stubs: one line each, calling `ct hook NAME`, quiet, quick, never failing the git command."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite")
MARK = "# memstore hook"
TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "hooks"


def stub(name: str, python: str | None = None) -> str:
    """The hook file's text: run memstore's indexer in the background-safe, never-failing way."""
    py = shlex.quote(python or sys.executable)
    return (f"#!/bin/sh\n{MARK} ({name}): refresh the disposable index for the changed days\n"
            f'[ -n "$MEMSTORE_COMMITTING" ] || {py} -m memstore hook {name} "$@" >/dev/null 2>&1 || true\n')


def install(store) -> list[str]:
    """Write the stubs (keeping any foreign hook by chaining to it) and register the tree merge driver."""
    hooks_dir = store.git.hooks_dir()
    hooks_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for name in HOOKS:
        path = hooks_dir / name
        if path.exists() and MARK not in path.read_text(errors="replace"):
            path.rename(path.with_name(name + ".pre-memstore"))
        text = stub(name)
        chained = path.with_name(name + ".pre-memstore")
        if chained.exists():
            text += f'"{chained}" "$@"\n'
        path.write_text(text)
        os.chmod(path, 0o755)
        done.append(name)
    register_merge_driver(store)
    return done


def register_merge_driver(store) -> None:
    """The tree.json merge driver, and git fsyncing what it commits (memstore's files rely on it)."""
    py = shlex.quote(sys.executable)
    store.git.config_set("core.fsync", "committed")
    store.git.config_set("core.fsyncMethod", "batch")
    store.git.config_set("merge.memstore-tree.name", "memstore tree.json merge by topic id")
    store.git.config_set("merge.memstore-tree.driver", f"{py} -m memstore merge-tree %O %A %B")


def uninstall(store) -> list[str]:
    hooks_dir = store.git.hooks_dir()
    removed = []
    for name in HOOKS:
        path = hooks_dir / name
        if path.exists() and MARK in path.read_text(errors="replace"):
            path.unlink()
            removed.append(name)
            chained = path.with_name(name + ".pre-memstore")
            if chained.exists():
                chained.rename(path)
    return removed


def status(store) -> dict[str, str]:
    hooks_dir = store.git.hooks_dir()
    out = {}
    for name in HOOKS:
        path = hooks_dir / name
        if not path.exists():
            out[name] = "missing"
        elif MARK not in path.read_text(errors="replace"):
            out[name] = "foreign"
        elif not os.access(path, os.X_OK):
            out[name] = "not executable"
        else:
            out[name] = "installed"
    return out


def run_hook(store, name: str, args: list[str]) -> None:
    """What a stub does: bring the index up to date (the changed days are found by fingerprint)."""
    if name == "post-checkout" and len(args) >= 3 and args[2] == "0":
        return  # a file checkout, not a branch switch: the next read catches any change
    store.index(update=True)
