"""Git hooks: install the hook files of the top-level `hooks/` folder (the one source: `ct hooks
install` writes exactly those files, and `git config core.hooksPath <checkout>/hooks` uses them in
place) and run what they call. They refresh the disposable index after git changes the files (an
optimisation only), honour forgets a merge undid, and guard pushes.

A stub finds memstore on the PATH (`memstore`, then `ct`, then `python3 -m memstore` where that
imports) and exits 0 quietly when it finds none: no absolute interpreter path is written, so a
moved venv or another machine never breaks a git command, and every ct read updates the index
anyway. No merge driver is needed: every committed file merges with git's built-in rules.

`post-merge` also removes, in one commit, what the merge brought back of records forgotten on
another clone (git still holds MERGE_HEAD while the hook runs; the merge is committed, so the
hook's own commit is allowed). `pre-push` refuses a push that would carry such text, a conflict
marker or an unreadable file to the remote (memstore/upkeep/guard.py). On a bare repository
(`ct -C REMOTE.git hooks install`) the one hook is `pre-receive`, the remote's guard, which
refuses such pushes from every clone; it needs memstore (or ct) on the server's PATH and refuses
pushes it cannot check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..gitrepo import HOOK_MARK as MARK

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite", "pre-push")
BARE_HOOKS = ("pre-receive",)
MERGED_ENV = "MEMSTORE_MERGE_DONE"  # the MERGE_HEAD of a merge git has committed (post-merge runs)
INACTIVE = (
    "inactive: neither memstore nor ct is on PATH (the hook does nothing; ct commands index anyway)"
)


def source_dir():
    """The folder holding the hook files memstore installs: `hooks/` of the source checkout, or the
    copy the wheel carries (package `memstore.githooks`, mapped from that folder; a Traversable)."""
    here = Path(__file__).resolve().parent.parent.parent / "hooks"
    if (here / "post-commit").is_file() and MARK in (here / "post-commit").read_text(
        errors="replace"
    ):
        return here
    from importlib.resources import files

    return files("memstore.githooks")


def stub(name: str) -> str:
    """The hook file's text, as `hooks/NAME` holds it: run memstore if one can be found on PATH."""
    return (source_dir() / name).read_text(encoding="utf-8")


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
            text += chain(name, chained)
        path.write_text(text)
        os.chmod(path, 0o755)
        done.append(name)
    configure_git(store)
    return done


def chain(name: str, chained) -> str:
    """The line that runs the hook memstore's replaced, after memstore's own part."""
    if name == "pre-push":  # it reads the refs on stdin too, and its refusal counts
        return f'printf \'%s\\n\' "$input" | "{chained}" "$@" || exit $?\n'
    return f'"{chained}" "$@"\n'


def install_bare(gdir) -> list[str]:
    """The remote's guard: a `pre-receive` hook in a bare repository (a foreign one is chained)."""
    hooks_dir = Path(gdir) / "hooks"
    hooks_dir.mkdir(parents=True, exist_ok=True)
    path = hooks_dir / "pre-receive"
    chained = path.with_name("pre-receive.pre-memstore")
    if path.exists() and MARK not in path.read_text(errors="replace"):
        path.rename(chained)
    text = stub("pre-receive")
    if (
        chained.exists()
    ):  # stdin is read by memstore's guard first: keep a copy for the chained hook
        text = text.replace(
            '[ -z "$run" ] || exec $run hook pre-receive\n',
            'input=$(cat)\nif [ -n "$run" ]; then printf \'%s\\n\' "$input" | $run hook pre-receive || exit 1\n'
            f'  printf \'%s\\n\' "$input" | "{chained}"; exit $?\nfi\n',
        )
    path.write_text(text)
    os.chmod(path, 0o755)
    return list(BARE_HOOKS)


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


def run_hook(store, name: str, args: list[str], stdin=None) -> list[str]:
    """What a stub does: bring the index up to date (the changed days are found by fingerprint);
    after a merge, remove what it brought back of forgotten records; before a push, check it.
    Returns the problems that refuse a push (pre-push), else the notes to show."""
    if name == "pre-push":
        from ..gitrepo import RevReader, git_dir
        from .guard import pre_push

        return pre_push(RevReader(git_dir(store.root)), list(stdin or []))
    if name == "post-checkout" and len(args) >= 3 and args[2] == "0":
        return []  # a file checkout, not a branch switch: the next read catches any change
    # No check for an unfinished merge here: git still holds MERGE_HEAD while post-merge runs, and
    # indexing is only a cache update (rolling back is skipped mid-merge by recover_if_crashed).
    store.index(update=True)
    if name == "post-merge" and os.environ.get(MERGED_ENV):
        from ..forget.leftovers import apply_tombstones

        applied = apply_tombstones(store)
        if applied.commit:
            return [
                f"memstore: removed what the merge brought back of records forgotten on another clone "
                f"(commit {applied.commit[:10]})"
            ]
    return []


def finished_merge(root) -> str | None:
    """The MERGE_HEAD of a merge git has already committed (what a post-merge hook sees), else None."""
    from ..errors import GitError
    from ..gitrepo import GitRepo, git_dir

    gdir = git_dir(Path(root))
    try:
        merged = (gdir / "MERGE_HEAD").read_text().strip() if gdir is not None else ""
    except OSError:
        return None
    if not merged:
        return None
    git = GitRepo(Path(root))
    try:
        git.run("merge-base", "--is-ancestor", merged, "HEAD")
        if git.run("diff", "--name-only", "--diff-filter=U"):
            return None
    except GitError:
        return None
    return merged
