"""The top-level hooks/ folder is the one source of the git hooks memstore installs: `ct hooks
install` writes exactly those files, and a store can use the folder in place with
`git config core.hooksPath <checkout>/hooks` (docs/architecture.md, "hooks/")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ct, make_store
from test_forget_every_clone import SECRET, _holds_secret, _stale_clone_brings_it_back, git

REPO = Path(__file__).resolve().parent.parent
HOOKS = REPO / "hooks"


def test_hooks_install_writes_exactly_the_files_of_the_hooks_folder(tmp_path):
    st = make_store(tmp_path / "s")
    ct("-C", st.root, "hooks", "install")
    installed = st.root / ".git" / "hooks"
    names = sorted(p.name for p in HOOKS.iterdir() if p.name != "pre-receive")
    assert names == ["post-checkout", "post-commit", "post-merge", "post-rewrite", "pre-push"]
    for name in names:
        assert (installed / name).read_bytes() == (HOOKS / name).read_bytes(), name
        assert os.access(installed / name, os.X_OK) and os.access(HOOKS / name, os.X_OK)
    assert "installed" in ct("-C", st.root, "hooks", "status").stdout


def test_a_bare_remote_gets_the_pre_receive_file(tmp_path):
    remote = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    ct("-C", remote, "hooks", "install")
    assert (remote / "hooks" / "pre-receive").read_bytes() == (HOOKS / "pre-receive").read_bytes()


def test_a_foreign_hook_is_chained_after_the_file(tmp_path):
    st = make_store(tmp_path / "s")
    hook = st.root / ".git" / "hooks" / "post-commit"
    hook.unlink()
    hook.write_text("#!/bin/sh\necho mine\n")
    ct("-C", st.root, "hooks", "install")
    text = hook.read_text()
    assert (
        text.startswith((HOOKS / "post-commit").read_text()) and "post-commit.pre-memstore" in text
    )


def test_core_hooks_path_to_the_checkout_folder_runs_the_hooks_in_place(tmp_path):
    """No copies: a clone whose git runs hooks/ of this checkout cleans what a plain pull brought back
    of a forgotten record (post-merge), exactly as installed hooks do."""
    _a, b, _remote, rid = _stale_clone_brings_it_back(tmp_path)
    for p in (b / ".git" / "hooks").iterdir():
        p.unlink()
    git(b, "config", "core.hooksPath", str(HOOKS))
    git(b, "pull", "-q", "--no-rebase")
    assert not _holds_secret(b), "the post-merge hook of hooks/ did not run"
    assert "forgotten on another clone" in git(b, "log", "-1", "--format=%s").stdout
    assert SECRET not in (b / "log" / "2026" / "2026-11-30.jsonl").read_text()
    assert ct("-C", b, "fsck").returncode == 0
