"""Shared fixtures: offline, deterministic stores on the hashing embedder, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# CI has no global git identity; tests must not depend on one.
for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
    os.environ.pop(key, None)

REPO = Path(__file__).resolve().parent.parent
CT = [sys.executable, "-m", "memstore"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
    monkeypatch.delenv("MEMSTORE_DIR", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    # Git hooks find memstore on the PATH (no interpreter path is written into them), as after `pip install`.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def store(tmp_path):
    """An empty store on the hashing embedder, timezone UTC."""
    from memstore.store import Store

    return Store.init(tmp_path / "store", embedder="hash", timezone="UTC")


def make_store(path, timezone="UTC", embedder="hash"):
    from memstore.store import Store

    return Store.init(path, embedder=embedder, timezone=timezone)


def write_turns(store, rows, fields=("ts", "role", "text", "session", "actor"), **extra):
    """Write tuples as conversation turns in one commit; `fields` names each tuple's columns."""
    recs = [store.normalize({**dict(zip(fields, row)), **extra}) for row in rows]
    return store.write(recs, f"Add {len(recs)} test turns")


def ct(*args, cwd=None, input=None, check=True, env=None):
    """Run the real `ct` in a subprocess; returns CompletedProcess with text output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([*CT, *map(str, args)], cwd=cwd, input=input, capture_output=True, text=True, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"ct {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def git_clean(root) -> bool:
    out = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True).stdout
    return out.strip() == ""


def commits(root) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line]


def committed_ids(root):
    """Record ids in every committed day log (HEAD), with how often each occurs."""
    import json
    from collections import Counter

    run = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True, check=True).stdout
    ids = Counter()
    for path in run("ls-tree", "-r", "--name-only", "HEAD", "--", "log").split():
        for line in run("show", f"HEAD:{path}").splitlines():
            ids[json.loads(line)["id"]] += 1
    return ids


def log_records(root) -> list[dict]:
    """Every record in the store's day logs on disk, in file order."""
    import json

    out = []
    for p in sorted((Path(root) / "log").rglob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines()]
    return out
