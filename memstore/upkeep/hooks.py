"""Git hook stubs that refresh the disposable index after git changes the files: an optimisation only.

A stub finds memstore on the PATH (`memstore`, then `ct`, then `python3 -m memstore` where that
imports) and exits 0 quietly when it finds none: no absolute interpreter path is written, so a
moved venv or another machine never breaks a git command, and every ct read updates the index
anyway. No merge driver is needed: every committed file merges with git's built-in rules.
"""

from __future__ import annotations

import os
import shutil
import subprocess

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite")
MARK = "# memstore hook"
INACTIVE = "inactive: neither memstore nor ct is on PATH (the hook does nothing; ct commands index anyway)"


def stub(name: str) -> str:
    """The hook file's text: run memstore's indexer if one can be found, never failing the git command."""
    return (
        f"#!/bin/sh\n{MARK} ({name}): refresh the disposable index (optional: every ct read does it too)\n"
        '[ -n "$MEMSTORE_COMMITTING" ] || {\n'
        f'  if command -v memstore >/dev/null 2>&1; then memstore hook {name} "$@"\n'
        f'  elif command -v ct >/dev/null 2>&1; then ct hook {name} "$@"\n'
        "  elif command -v python3 >/dev/null 2>&1 && python3 -c 'import memstore' 2>/dev/null; then\n"
        f'    python3 -m memstore hook {name} "$@"\n'
        "  fi\n"
        "} >/dev/null 2>&1\n"
        "true\n"
    )


def install(store) -> list[str]:
    """Write the stubs (keeping any foreign hook by chaining to it) and set git's fsync for commits."""
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
    configure_git(store)
    return done


def configure_git(store) -> None:
    """git fsyncs what it commits (memstore's files rely on it); a merge driver an older memstore
    registered is removed (its command no longer exists, so it would turn merges into conflicts)."""
    from ..errors import GitError

    store.git.config_set("core.fsync", "committed")
    store.git.config_set("core.fsyncMethod", "batch")
    try:
        store.git.run("config", "--local", "--remove-section", "merge.memstore-tree")
    except GitError:
        pass  # never registered


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


def runnable() -> bool:
    """Can a stub find memstore here (the same search the stub makes)?"""
    if shutil.which("memstore") or shutil.which("ct"):
        return True
    py = shutil.which("python3")
    if not py:
        return False
    return subprocess.run([py, "-c", "import memstore"], capture_output=True).returncode == 0


def status(store) -> dict[str, str]:
    """Each hook's state: missing, foreign, not executable, outdated, inactive or installed."""
    hooks_dir = store.git.hooks_dir()
    out = {}
    can_run = None
    for name in HOOKS:
        path = hooks_dir / name
        text = path.read_text(errors="replace") if path.exists() else ""
        if not path.exists():
            out[name] = "missing"
        elif MARK not in text:
            out[name] = "foreign"
        elif not os.access(path, os.X_OK):
            out[name] = "not executable"
        elif not text.startswith(stub(name)):
            out[name] = 'outdated (an older memstore wrote it; run "ct hooks install")'
        else:
            can_run = runnable() if can_run is None else can_run
            out[name] = "installed" if can_run else INACTIVE
    return out


def run_hook(store, name: str, args: list[str]) -> None:
    """What a stub does: bring the index up to date (the changed days are found by fingerprint)."""
    if name == "post-checkout" and len(args) >= 3 and args[2] == "0":
        return  # a file checkout, not a branch switch: the next read catches any change
    # No check for an unfinished merge here: git still holds MERGE_HEAD while post-merge runs, and
    # indexing is only a cache update (rolling back is skipped mid-merge by recover_if_crashed).
    store.index(update=True)
