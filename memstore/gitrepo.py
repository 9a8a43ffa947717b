"""The only module that runs git: always on the store's own repository, never an enclosing one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import GitError

IDENTITY = ("memstore", "memstore@localhost")
# Set while memstore itself commits, so our own hook stubs skip work the command does anyway.
IN_MEMSTORE_ENV = "MEMSTORE_COMMITTING"


class GitRepo:
    """Runs the `git` executable on one repository (plain subprocesses: importing gitpython cost
    a fresh `ct add` more time than the git commands it then ran)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not (self.root / ".git").exists():
            raise GitError(f"{self.root} is not a git repository (no .git in it)")

    @classmethod
    def init(cls, root: Path) -> "GitRepo":
        Path(root).mkdir(parents=True, exist_ok=True)
        _git(Path(root), ["init", "-q", "--initial-branch=main"], os.environ)
        return cls(root)

    def run(self, *args, env: dict | None = None, strip_newline_in_stdout: bool = True,
            stdout_as_string: bool = True) -> str | bytes:
        """Run one git command on this repository; GitError carries git's own words."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.pop("GIT_DIR", None)
        full_env.pop("GIT_WORK_TREE", None)
        full_env.pop("GIT_INDEX_FILE", None)
        out = _git(self.root, [*self._identity_args(), *args], full_env)
        if strip_newline_in_stdout and out.endswith(b"\n"):
            out = out[:-1]
        return out.decode("utf-8", "surrogateescape") if stdout_as_string else out

    def _identity_args(self) -> list[str]:
        if not hasattr(self, "_identity"):
            env_has = os.environ.get("GIT_AUTHOR_NAME") and os.environ.get("GIT_AUTHOR_EMAIL")
            has = False
            if not env_has:
                try:
                    found = _git(self.root, ["config", "--get-regexp", r"^user\.(name|email)$"], os.environ)
                    keys = {line.split(b" ", 1)[0].lower() for line in found.splitlines()}
                    has = {b"user.name", b"user.email"} <= keys
                except GitError:  # exit 1: neither is set
                    has = False
            self._identity = [] if (has or env_has) else ["-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}"]
        return self._identity

    def config_set(self, key: str, value: str) -> None:
        self.run("config", "--local", key, value)

    def commit(self, message: str, paths: list[str] | None = None, allow_empty: bool = False) -> str | None:
        """Stage `paths` (or everything) and commit; None when nothing changed."""
        if paths is None:
            self.run("add", "-A")
        elif paths:
            for i in range(0, len(paths), 500):
                self.run("add", "-A", "--", *paths[i : i + 500])
        args = ["commit", "-q", "--no-verify", "-m", message] + (["--allow-empty"] if allow_empty else [])
        try:
            self.run(*args, env={IN_MEMSTORE_ENV: "1"})
        except GitError:
            # Asking first would cost a git process on every write; asking after a failure tells
            # "nothing to commit" (exit 1, not an error for us) from a real failure.
            if not allow_empty and not self.staged_changes():
                return None
            raise
        return self.head()

    def staged_changes(self) -> bool:
        try:
            self.run("diff", "--cached", "--quiet")
            return False
        except GitError:
            return True

    def head(self) -> str | None:
        try:
            return self.run("rev-parse", "-q", "--verify", "HEAD^{commit}") or None
        except GitError:  # an unborn branch: no commit yet
            return None

    def status_porcelain(self) -> list[str]:
        out = self.run("status", "--porcelain", "--untracked-files=all")
        return [line for line in out.splitlines() if line]

    def changed_files(self, old: str, new: str) -> list[str]:
        out = self.run("diff", "--name-only", "--no-renames", old, new)
        return [line for line in out.splitlines() if line]

    def log(self, max_count: int | None = None, paths: list[str] | None = None) -> list[dict]:
        """Commits newest first: sha, date, subject, body, and per-file added/removed line counts."""
        args = ["log", "--numstat", "--format=\x1e%H\x1f%aI\x1f%an\x1f%s\x1f%b\x1d"]
        if max_count:
            args.append(f"-n{max_count}")
        if paths:
            args += ["--", *paths]
        try:
            out = self.run(*args)
        except GitError:
            return []
        commits = []
        for chunk in out.split("\x1e")[1:]:
            head, _, stats = chunk.partition("\x1d")
            sha, date, author, subject, body = head.split("\x1f")
            files = []
            for line in stats.strip().splitlines():
                parts = line.split("\t")
                if len(parts) == 3:
                    files.append({"path": parts[2], "added": _int(parts[0]), "removed": _int(parts[1])})
            commits.append({"sha": sha, "date": date, "author": author, "subject": subject, "body": body.strip(), "files": files})
        return commits

    def show(self, rev: str, path: str) -> str | None:
        try:
            return self.run("show", f"{rev}:{path}", strip_newline_in_stdout=False)
        except GitError:
            return None

    def hooks_dir(self) -> Path:
        out = self.run("rev-parse", "--git-path", "hooks")
        p = Path(out)
        return p if p.is_absolute() else self.root / p


def _int(s: str) -> int:
    return int(s) if s.isdigit() else 0




def _git(cwd: Path, args: list[str], env) -> bytes:
    """stdout of `git args` run in `cwd`; GitError with git's stderr when it exits non-zero."""
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    if proc.returncode != 0:
        words = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        name = next(a for i, a in enumerate(args) if a != "-c" and (i == 0 or args[i - 1] != "-c"))
        raise GitError(f"git {name} failed in {cwd}: {words}")
    return proc.stdout


def find_git_root(path: Path) -> Path | None:
    for p in [path, *path.parents]:
        if (p / ".git").exists():
            return p
    return None
