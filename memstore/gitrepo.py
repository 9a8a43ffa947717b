"""The only module that runs git: always on the store's own repository, never an enclosing one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import GitError, MemstoreError

HOOK_MARK = "# memstore hook"  # the first comment of every hook file memstore installs (hooks/)

IDENTITY = ("memstore", "memstore@localhost")
INDEX_TUNE_BYTES = (
    1_000_000  # .git/index size from which writes switch it to format 4 + split index
)
# Set while memstore itself commits, so our own hook stubs skip work the command does anyway.
IN_MEMSTORE_ENV = "MEMSTORE_COMMITTING"


class GitMissing(GitError):
    """No git to run: gitpython cannot load without it, and a store is a git repository."""

    nothing_written = True  # no write gets past its first step without git: nothing to roll back

    def __init__(self):
        super().__init__(
            "git is not installed or not on the PATH: a store is a git repository and memstore runs "
            "the real git (install it, or set GIT_PYTHON_GIT_EXECUTABLE to its full path)"
        )


PACK_PATHS = 200  # a commit of this many paths or more writes its blobs into a pack (see commit)


class GitRepo:
    """Runs the real `git` on one repository through gitpython's command runner (see `_git`)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not (self.root / ".git").exists():
            raise GitError(
                f"{self.root} is not a git repository (no .git in it), so ct cannot commit here; "
                "reads and searches still work.",
                f"A copy of the files without .git: clone the store's repository instead, or make this one "
                f'with "git -C {self.root} init -b main && git -C {self.root} add -A && '
                f"git -C {self.root} commit -m 'Memory store'\". Nothing was changed.",
            )

    @classmethod
    def init(cls, root: Path) -> "GitRepo":
        Path(root).mkdir(parents=True, exist_ok=True)
        _git(Path(root), ["init", "-q", "--initial-branch=main"], os.environ)
        return cls(root)

    def run(
        self,
        *args,
        env: dict | None = None,
        strip_newline_in_stdout: bool = True,
        stdout_as_string: bool = True,
    ) -> str | bytes:
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
            keys: dict[bytes, bytes] = {}
            try:  # one process answers both questions a write has: who commits, and where hooks live
                found = _git(
                    self.root,
                    [
                        "config",
                        "--get-regexp",
                        r"^(user\.(name|email)|core\.hookspath|core\.sparsecheckout"
                        r"|memstore\.author|commit\.gpgsign)$",
                    ],
                    os.environ,
                )
                for line in found.splitlines():
                    key, _, value = line.partition(b" ")
                    keys[key.lower()] = value
            except GitMissing:
                raise
            except GitError:  # exit 1: none is set
                pass
            self._hooks_path = (
                keys.get(b"core.hookspath", b"").decode("utf-8", "surrogateescape") or None
            )
            self._sparse = keys.get(b"core.sparsecheckout", b"").strip().lower() in (
                b"true",
                b"yes",
                b"on",
                b"1",
            )
            # commit-tree (the plumbing a write commits with) does not read commit.gpgSign itself
            self._sign = keys.get(b"commit.gpgsign", b"").strip().lower() in (
                b"true",
                b"yes",
                b"on",
                b"1",
            )
            author = keys.get(b"memstore.author")
            self._configured_author = (
                None if author is None else author.decode("utf-8", "surrogateescape")
            )
            has = b"user.name" in keys and b"user.email" in keys
            self._identity = (
                []
                if (has or env_has)
                else ["-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}"]
            )
        return self._identity

    def configured_author(self) -> str | None:
        """git config `memstore.author` as git reads it for this repository (its own config
        first, then the user's), or None."""
        self._identity_args()
        return self._configured_author

    def author_identity(self) -> str | None:
        """The author identity git resolves for this repository (`git var GIT_AUTHOR_IDENT`: the
        GIT_AUTHOR_* variables, then author.* and user.* config) as "name <email>"; None when
        none is set (memstore then commits as its own fallback identity, which names nobody)."""
        if self._identity_args():
            return None
        try:
            ident = self.run("var", "GIT_AUTHOR_IDENT")
        except GitError:
            return None
        # "Name <email> 1733300000 +0100": the name and address, without git's timestamp
        return ident.rsplit(" ", 2)[0] if ident.count(" ") >= 2 else (ident or None)

    @property
    def sparse(self) -> bool:
        """Is this a sparse checkout (core.sparseCheckout)? Read with the identity, no extra process."""
        self._identity_args()
        return self._sparse

    def config_set(self, key: str, value: str) -> None:
        self.run("config", "--local", key, value)

    def set_head_of(self, other: Path, branch: str) -> None:
        """Point the HEAD of another repository on this machine (a bare remote) at `branch`."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
        }
        _git(
            self.root,
            ["--git-dir", str(other), "symbolic-ref", "HEAD", f"refs/heads/{branch}"],
            env,
        )

    def commit(
        self,
        message: str,
        paths: list[str] | None = None,
        allow_empty: bool = False,
        only_paths: bool = False,
        sealed_under: str | None = None,
    ) -> str | None:
        """Stage `paths` (or everything) and commit; None when nothing changed.

        `sealed_under`: a folder prefix ("packs/") whose files are ciphertext; in a big write they
        are stored without zlib (random bytes do not compress: deflating them was half of git's
        time in a 10,000-turn import, for 0 bytes saved), and the other files at zlib's level 1.

        On a branch with history the commit is made with git's plumbing (write-tree, commit-tree,
        update-ref with the old value, so a concurrent ref change fails instead of being lost):
        `git commit` refreshes the stat data of every tracked file first, which at a million
        records (20,000 files) is most of a write's git time, and a write has nothing to refresh.
        What `git commit` adds is kept: its message clean-up, reflog entry, commit.gpgSign
        (read here and passed as -S: commit-tree ignores it), the post-commit hook, and `gc --auto` when loose objects pile up.
        `only_paths`: refuse (unstaging `paths` again) when the commit would also carry changes
        someone else staged (the write transaction's commits carry only their own files).
        """
        message = str(message).replace(
            "\0", "\\0"
        )  # git takes no NUL in a message; a turn's excerpt may hold one
        self._tune_index()
        if paths is None:
            self.run("add", "-A")
        elif len(paths) >= PACK_PATHS:
            self.stage_big(paths, sealed_under)
        elif paths:
            self._add(paths)
        parent = self.head()
        if parent is not None and git_dir(self.root) is not None:
            sha = self._plumbing_commit(message, parent, allow_empty, paths if only_paths else None)
            if sha is not None and paths and len(paths) >= PACK_PATHS:
                self.pack_loose()
            return sha
        args = ["commit", "-q", "--no-verify", "-m", message] + (
            ["--allow-empty"] if allow_empty else []
        )
        try:
            self.run(*args, env={IN_MEMSTORE_ENV: "1"})
        except GitError:
            # Asking first would cost a git process on every write; asking after a failure tells
            # "nothing to commit" (exit 1, not an error for us) from a real failure.
            if not allow_empty and not self.staged_changes():
                return None
            raise
        return self.head()

    def stage_big(self, paths: list[str], sealed_under: str | None = None) -> None:
        """`git add` a big write's paths the way its commit stages them: each `git add` streams its
        blobs into one pack as it hashes them (core.bigFileThreshold=1: no loose object written and
        then compressed again by a repack; half the git time of a 5,000-turn import), the files
        under `sealed_under` (ciphertext) at pack.compression=0 and the rest at 1. `commit` calls it
        for PACK_PATHS paths or more; a big write's forked file writer (core.FilesBeside) calls it
        for the files it wrote, so that the commit finds them staged and hashes nothing again."""
        groups = [(paths, [])]
        if sealed_under:
            # random bytes do not compress: deflating them was half of git's time in a 10,000-turn
            # import, for 0 bytes saved; the text at zlib's fastest level, 2.4x faster than git's
            # default on day logs for 15 % more bytes (the ciphertext is most of a write's bytes)
            groups = [
                (
                    [p for p in paths if not p.startswith(sealed_under)],
                    ["-c", "pack.compression=1"],
                ),
                ([p for p in paths if p.startswith(sealed_under)], ["-c", "pack.compression=0"]),
            ]
        for group, extra in groups:
            self._add(group, ["-c", "core.bigFileThreshold=1", *extra])

    def _add(self, paths: list[str], opts: list[str] | None = None) -> None:
        """`git add -A` of `paths`, 500 to a process. core.preloadIndex=false: preloading stats every
        tracked file in threads first (7 of 22 ms at 1M records); with a pathspec only the named
        paths need a look."""
        for i in range(0, len(paths), 500):
            self.run(
                "-c",
                "core.preloadIndex=false",
                *(opts or []),
                "add",
                "-A",
                "--",
                *paths[i : i + 500],
            )

    def _plumbing_commit(
        self, message: str, parent: str, allow_empty: bool, paths: list[str] | None
    ) -> str | None:
        text = clean_message(message)
        tree = self.run("write-tree")
        parent_tree = _loose_commit_tree(self.root, parent) or self.run(
            "rev-parse", f"{parent}^{{tree}}"
        )
        if not allow_empty and tree == parent_tree:
            return None
        if paths:  # an empty list commits what is staged already
            self._refuse_foreign_staged(parent_tree, tree, paths)
        env = {IN_MEMSTORE_ENV: "1"}
        self._identity_args()  # reads commit.gpgSign with the identity, in the same git process
        sign = ["-S"] if self._sign else []  # signed with user.signingkey, as `git commit` would
        sha = self.run("commit-tree", *sign, tree, "-p", parent, "-m", text, env=env)
        subject = text.split("\n", 1)[0]
        self.run("update-ref", "-m", f"commit: {subject}", "HEAD", sha, parent)
        self._post_commit(env)
        return sha

    def pack_loose(self) -> None:
        """Put the loose objects (a big write's trees; its blobs went into a pack as they were
        added) into one new pack now, without looking for deltas: a cost that follows this write,
        instead of thousands of loose files and a `gc --auto` of minutes at some later, small write."""
        try:
            self.run("repack", "-d", "-q", "--window=0")
        except GitError:
            pass  # an optimisation: the objects are committed either way

    def _tune_index(self) -> None:
        """Once a store's .git/index passes INDEX_TUNE_BYTES (about 7,000 files, ~350k records),
        switch it to index format 4 (prefix-compressed paths) and a split index (a write rewrites only
        the entries it changed), git's own settings for big working trees: at a million records they
        halve what `git add` + `write-tree` cost. Small stores keep git's defaults, which every tool
        reads; a store where the person set core.splitIndex either way is left as it is."""
        gdir = git_dir(self.root)
        if gdir is None:
            return
        try:
            if (gdir / "index").stat().st_size < int(
                os.environ.get("MEMSTORE_INDEX_TUNE_BYTES", INDEX_TUNE_BYTES)
            ):
                return
            common = _common_dir(gdir)
            if (
                "splitindex"
                in (common / "config").read_text(encoding="utf-8", errors="replace").lower()
            ):
                return
        except OSError:
            return
        self.run("config", "--local", "core.splitIndex", "true")
        self.run("config", "--local", "index.version", "4")
        self.run("update-index", "--index-version", "4", "--split-index")

    def _refuse_foreign_staged(self, parent_tree: str, tree: str, paths: list[str]) -> None:
        """A commit of `paths` must not carry what a person staged with `git add` meanwhile: compare
        the two trees (only the folders that differ are read) and refuse, unstaging our own paths."""
        changed = [
            p
            for p in self.run(
                "diff-tree",
                "-r",
                "--name-only",
                "-z",
                parent_tree,
                tree,
                strip_newline_in_stdout=False,
            ).split("\0")
            if p
        ]
        ours = [p.rstrip("/") for p in paths]
        foreign = [p for p in changed if not any(p == o or p.startswith(o + "/") for o in ours)]
        if not foreign:
            return
        for i in range(0, len(paths), 500):
            self.run("reset", "-q", "--", *paths[i : i + 500])
        err = MemstoreError(
            f"{self.root / foreign[0]} has staged changes"
            + (f" (and {len(foreign) - 1} more files)" if len(foreign) > 1 else "")
            + "; this write would commit them.",
            "Commit them with git (or unstage them with git restore --staged) and run the command again. "
            "Nothing was written.",
        )
        err.foreign_staged = foreign
        raise err

    def _post_commit(self, env: dict) -> None:
        """What `git commit` does after the ref moves: the post-commit hook (unless it is only
        memstore's own stub, which skips memstore's commits) and `gc --auto` (git's own test:
        more than gc.auto/256 loose objects in objects/17)."""
        self._identity_args()
        hooks = (
            Path(self._hooks_path)
            if self._hooks_path
            else (git_dir(self.root) or self.root / ".git") / "hooks"
        )
        if not hooks.is_absolute():
            hooks = self.root / hooks
        hook = hooks / "post-commit"
        if hook.is_file() and os.access(hook, os.X_OK):
            ours = (
                HOOK_MARK in hook.read_text(errors="replace")
                and not hook.with_name("post-commit.pre-memstore").exists()
            )
            if not ours:
                try:
                    self.run("hook", "run", "--ignore-missing", "post-commit", env=env)
                except GitError:
                    pass  # git commit ignores the hook's exit status too
        gdir = git_dir(self.root)
        try:
            loose = len(os.listdir(gdir / "objects" / "17")) if gdir else 0
        except OSError:
            loose = 0
        if loose > 27:
            try:
                self.run("gc", "--auto", "--quiet")
            except GitError:
                pass

    def staged_changes(self) -> bool:
        try:
            self.run("diff", "--cached", "--quiet")
            return False
        except GitError:
            return True

    def head(self) -> str | None:
        """HEAD's commit, or None on an unborn branch; read from the ref files (no process) when
        they are plain, else asked of git."""
        found = _head_from_files(self.root)
        if found is not False:
            return found
        try:
            return self.run("rev-parse", "-q", "--verify", "HEAD^{commit}") or None
        except GitError:  # an unborn branch: no commit yet
            return None

    def blob_ids(self, paths: list[str], rev: str = "HEAD") -> dict[str, str]:
        """{path: blob id at `rev`} for the given files (those absent there are left out)."""
        out: dict[str, str] = {}
        for i in range(0, len(paths), 500):
            try:
                listing = self.run(
                    "ls-tree", "-z", rev, "--", *paths[i : i + 500], strip_newline_in_stdout=False
                )
            except GitError:  # an unborn branch
                return out
            for item in listing.split("\0"):
                meta, _, path = item.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob":
                    out[path] = parts[2]
        return out

    def log(self, max_count: int | None = None, paths: list[str] | None = None) -> list[dict]:
        """Commits newest first: sha, date, subject, body, and per-file added/removed line counts."""
        # A merge counts what it brought in over the first parent (git shows no diff for merges by default).
        args = [
            "log",
            "--numstat",
            "--diff-merges=first-parent",
            # %G? %GS %GK: git verifies each signed commit (SSH: against gpg.ssh.allowedSignersFile)
            "--format=\x1e%H\x1f%aI\x1f%an\x1f%ae\x1f%G?\x1f%GS\x1f%GK\x1f%s\x1f%b\x1d",
        ]
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
            sha, date, author, email, sig, signer, key, subject, body = head.split("\x1f", 8)
            files = []
            for line in stats.strip().splitlines():
                parts = line.split("\t")
                if len(parts) == 3:
                    files.append(
                        {"path": parts[2], "added": _int(parts[0]), "removed": _int(parts[1])}
                    )
            commits.append(
                {
                    "sha": sha,
                    "date": date,
                    "author": author,
                    "author_email": email,
                    "signature": signature(sig, signer, key),  # None: "N", see below
                    "subject": subject,
                    "body": body.strip(),
                    "files": files,
                }
            )
        for sha in self._signed(c["sha"] for c in commits if c["signature"] is None):
            # %G? says "N" for a signature git could not even try (an SSH one with no
            # gpg.ssh.allowedSignersFile): signed all the same, and not verified
            for c in commits:
                if c["sha"] == sha:
                    c["signature"] = signature("E", "", "")
        return commits

    def _signed(self, shas) -> list[str]:
        """Which of these commits carry a signature header (gpgsig), read from their raw headers
        (`git rev-list --no-walk --header`, one process)."""
        shas = list(shas)
        if not shas:
            return []
        try:
            raw = self.run("rev-list", "--no-walk=unsorted", "--header", *shas)
        except GitError:
            return []
        out = []
        for obj in raw.split("\0"):
            sha, _, rest = obj.strip("\n").partition("\n")
            headers = rest.split("\n\n", 1)[0]
            if "\ngpgsig " in "\n" + headers or "\ngpgsig-sha256 " in "\n" + headers:
                out.append(sha)
        return out

    def deletions(self, folder: str, max_count: int = 200) -> list[dict]:
        """Commits of this branch that deleted files under `folder`, newest first: sha, subject,
        body and the deleted paths. Merges are skipped (git shows them no diff)."""
        args = ["log", f"-n{max_count}", "--no-renames", "--diff-filter=D", "--name-only"]
        try:
            out = self.run(*args, "--format=\x1e%H\x1f%s\x1f%b\x1d", "--", folder)
        except GitError:  # an unborn branch
            return []
        commits = []
        for chunk in out.split("\x1e")[1:]:
            head, _, names = chunk.partition("\x1d")
            sha, subject, body = head.split("\x1f")
            commits.append({"sha": sha, "subject": subject, "body": body, "paths": names.split()})
        return commits

    def blob(self, rev: str, path: str) -> bytes | None:
        """The bytes of `path` at revision `rev`, or None where it is absent (or `rev` is not a
        commit). Read through gitpython's object database: one `git cat-file --batch` process
        serves every call (1.6 ms a blob here, against 2.6 ms for a `git cat-file` process each)."""
        import git

        if not hasattr(self, "_repo"):
            self._repo = git.Repo(self.root)
        try:
            return self._repo.rev_parse(f"{rev}:{path}").data_stream.read()
        except (KeyError, ValueError, IndexError, git.BadName, git.BadObject):
            return None

    def read_blobs(self, oids: list[str]):
        """Yield (oid, bytes, None) for each blob git reads whole and whose bytes hash to its id, else
        (oid, None, why): one `git cat-file --batch` process, started again past an object it dies on."""
        import hashlib
        import threading

        todo = list(oids)
        while todo:
            proc = subprocess.Popen(
                ["git", "-C", str(self.root), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )

            def feed(items=todo, pipe=proc.stdin):
                try:
                    pipe.write("".join(f"{o}\n" for o in items).encode())
                    pipe.close()
                except OSError:  # git died on an object: the rest is asked again
                    pass

            threading.Thread(target=feed, daemon=True).start()
            done = 0
            for oid in todo:
                head = proc.stdout.readline().split()
                if len(head) == 2 and head[1] == b"missing":
                    done += 1
                    yield oid, None, "git cannot read it (missing, or its header is corrupt)"
                    continue
                if len(head) != 3:
                    break
                size = int(head[2])
                data = proc.stdout.read(size)
                if len(data) != size:
                    break  # git died while it streamed this one
                proc.stdout.read(1)
                done += 1
                algo = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
                if algo(b"blob %d\0" % size + data).hexdigest() != oid:
                    yield oid, None, "its bytes do not hash to its id"
                else:
                    yield oid, data, None
            proc.stdout.close()
            err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
            proc.wait()
            if done < len(todo):  # git died reading todo[done]
                yield todo[done], None, f"git cannot read it: {err[-1] if err else 'git exited'}"
                done += 1
            todo = todo[done:]

    def show(self, rev: str, path: str) -> str | None:
        try:
            return self.run("show", f"{rev}:{path}", strip_newline_in_stdout=False)
        except GitError:
            return None

    def files_at(self, rev: str, folder: str) -> dict[str, bytes]:
        """Every file under `folder` at revision `rev`: {path relative to the store: bytes}; {} if none."""
        import git  # gitpython: its object database reads a whole folder of blobs without a process each

        try:
            tree = git.Repo(self.root).commit(rev).tree / folder
        except (KeyError, ValueError, git.BadName):
            return {}
        return {b.path: b.data_stream.read() for b in tree.traverse() if b.type == "blob"}

    def is_ancestor(self, a: str, b: str) -> bool:
        """Whether commit `a` is an ancestor of (or is) `b`."""
        proc = subprocess.run(
            ["git", "-C", str(self.root), "merge-base", "--is-ancestor", a, b], capture_output=True
        )
        return proc.returncode == 0

    def present_commits(self, oids: list[str]) -> list[str]:
        """Those of `oids` that name a commit in this repository (one `git cat-file --batch-check`)."""
        if not oids:
            return []
        proc = subprocess.run(
            ["git", "-C", str(self.root), "cat-file", "--batch-check"],
            input="".join(f"{c}\n" for c in oids),
            capture_output=True,
            text=True,
        )
        return [
            ln.split()[0]
            for ln in proc.stdout.splitlines()
            if ln.endswith(" commit") or " commit " in ln
        ]

    def filter_repo(self, script: str, *args: str) -> subprocess.CompletedProcess:
        """Run a git-filter-repo program (Python source using `git_filter_repo`) in this repository, in a
        Python process of its own; the caller reads the result's returncode and stderr."""
        import sys

        return subprocess.run(
            [sys.executable, "-c", script, *args], cwd=self.root, capture_output=True, text=True
        )

    def hooks_dir(self) -> Path:
        out = self.run("rev-parse", "--git-path", "hooks")
        p = Path(out)
        return p if p.is_absolute() else self.root / p


class RevReader:
    """Reads files of commits in a repository by its git folder (a clone's .git or a bare remote),
    with no work tree: what the push guard needs. Keeps git's environment as a hook gets it (in a
    pre-receive hook the pushed objects are in a quarantine folder that GIT_OBJECT_DIRECTORY names)."""

    def __init__(self, gdir: Path):
        self.gdir = Path(gdir)

    def _run(self, *args: str, data: bytes | None = None) -> bytes:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")
        }
        proc = subprocess.run(
            ["git", "--git-dir", str(self.gdir), *args], input=data, capture_output=True, env=env
        )
        if proc.returncode:
            raise GitError(
                f"git {args[0]} failed in {self.gdir}: {proc.stderr.decode('utf-8', 'replace').strip()}"
            )
        return proc.stdout

    def has_commit(self, oid: str) -> bool:
        try:
            self._run("cat-file", "-e", f"{oid}^{{commit}}")
        except GitError:
            return False
        return True

    def is_ancestor(self, commit: str, rev: str) -> bool:
        """Does `rev` hold `commit` (False when this repository does not have it at all)?"""
        try:
            self._run("merge-base", "--is-ancestor", commit, rev)
        except GitError:
            return False
        return True

    def changed_paths(self, old: str | None, new: str) -> list[str]:
        """The files `new` changed since `old` (every file of `new` when old is None)."""
        args = (
            ("ls-tree", "-r", "--name-only", "-z", new)
            if old is None
            else ("diff", "--name-only", "-z", "--no-renames", old, new)
        )
        return [p for p in self._run(*args).decode("utf-8", "surrogateescape").split("\0") if p]

    def blob(self, rev: str, path: str) -> bytes | None:
        return self.blobs(rev, [path])[0]

    def blobs(self, rev: str, paths: list[str]) -> list[bytes | None]:
        """The bytes of each path at `rev` (None where it has none), with one `git cat-file --batch`."""
        if not paths:
            return []
        out = self._run(
            "cat-file",
            "--batch",
            data="".join(f"{rev}:{p}\n" for p in paths).encode("utf-8", "surrogateescape"),
        )
        got: list[bytes | None] = []
        pos = 0
        for _ in paths:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) < 3 or header[-1] == b"missing" or header[1] != b"blob":
                got.append(None)
                continue
            size = int(header[2])
            got.append(out[pos : pos + size])
            pos += size + 1
        return got


# git's %G? letters (git log --format): what git says of a commit's signature.
SIGNATURE_STATUS = {
    "G": "git verifies it",
    "U": "the key is not in the allowed signers",
    "B": "bad signature",
    "X": "the signature has expired",
    "Y": "the key has expired",
    "R": "the key was revoked",
    "E": "git cannot check it (no allowed signers file, or no public key)",
}


def signature(status: str, signer: str, key: str) -> dict | None:
    """A commit's signature as git verified it ({"verified", "status", "why", "signer", "key"}), or
    None when the commit is not signed (%G? "N")."""
    status = status.strip()
    if status in ("", "N"):
        return None
    return {
        "verified": status == "G",
        "status": status,
        "why": SIGNATURE_STATUS.get(status, f"git says {status!r}"),
        "signer": signer or None,
        "key": key or None,
    }


def is_bare(path: Path) -> bool:
    """Is `path` a bare git repository (HEAD, objects/ and refs/ in it, and no work tree)?"""
    p = Path(path)
    return (
        (p / "HEAD").is_file()
        and (p / "objects").is_dir()
        and (p / "refs").is_dir()
        and not (p / ".git").exists()
    )


def clean_message(message: str) -> str:
    """git commit's default clean-up of a -m message: no trailing blanks on lines, no leading or
    trailing empty lines, runs of empty lines made one; ends with a newline."""
    lines = [ln.rstrip() for ln in str(message).replace("\r\n", "\n").split("\n")]
    out: list[str] = []
    for ln in lines:
        if ln or (out and out[-1]):
            out.append(ln)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


_HEX = frozenset("0123456789abcdef")


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def _common_dir(gdir: Path) -> Path:
    """The folder holding refs, objects and config (a linked worktree's git folder points to it)."""
    try:
        rel = (gdir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return gdir
    return Path(rel) if Path(rel).is_absolute() else (gdir / rel).resolve()


def _head_from_files(root: Path):
    """HEAD's commit from .git/HEAD and the loose or packed ref: a sha, None (unborn branch), or
    False when the layout is not the plain one (then git is asked)."""
    gdir = git_dir(root)
    if gdir is None:
        return False
    try:
        head = (gdir / "HEAD").read_text(encoding="utf-8").strip()
        common = _common_dir(gdir)
    except OSError:
        return False
    if _is_oid(head):
        return head  # detached
    if not head.startswith("ref: refs/"):
        return False
    ref = head[5:]
    for base in (
        (gdir,)
        if ref.startswith(("refs/bisect/", "refs/worktree/", "refs/rewritten/"))
        else (common,)
    ):
        try:
            sha = (base / ref).read_text(encoding="utf-8").strip()
            return sha if _is_oid(sha) else False
        except FileNotFoundError:
            pass
        except OSError:
            return False
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None  # no such ref anywhere: an unborn branch
    except OSError:
        return False
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha if _is_oid(sha) else False
    return None


def _loose_commit_tree(root: Path, sha: str) -> str | None:
    """The tree of a commit stored as a loose object (our own recent commits are), else None."""
    import zlib

    gdir = git_dir(root)
    if gdir is None:
        return None
    try:
        common = _common_dir(gdir)
        raw = zlib.decompressobj().decompress(
            (common / "objects" / sha[:2] / sha[2:]).read_bytes(), 200
        )
    except (OSError, zlib.error):
        return None
    header, _, body = raw.partition(b"\0")
    if not header.startswith(b"commit ") or not body.startswith(b"tree "):
        return None
    tree = body[5 : body.find(b"\n")].decode("ascii", "replace")
    return tree if _is_oid(tree) else None


def _int(s: str) -> int:
    return int(s) if s.isdigit() else 0


# What git leaves in its folder while an operation waits for the user, and how to finish or abort it.
UNFINISHED = (
    ("rebase-merge", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("rebase-apply", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("MERGE_HEAD", "a merge", "git commit", "git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue", "git revert --abort"),
)


def git_dir(root: Path) -> Path | None:
    """The store's git folder, found without running git (a `.git` file points elsewhere in worktrees)."""
    dot = Path(root) / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if text.startswith("gitdir:"):
        p = Path(text.split(":", 1)[1].strip())
        return p if p.is_absolute() else (Path(root) / p).resolve()
    return None


def detached_head(root: Path) -> str | None:
    """HEAD's commit when HEAD is detached (a `git checkout` of a commit, a rebase stopped), else None.
    One file read, no git process."""
    gdir = git_dir(root)
    try:
        head = (gdir / "HEAD").read_text(encoding="utf-8").strip() if gdir is not None else ""
    except OSError:
        return None
    return head if _is_oid(head) else None


def _git(cwd: Path, args: list[str], env) -> bytes:
    """stdout of `git args` run in `cwd` through gitpython's command runner; GitError with git's stderr.

    gitpython starts from a copy of os.environ, so variables a hook may have set (GIT_DIR,
    GIT_WORK_TREE, GIT_INDEX_FILE) are pinned to this repository rather than dropped. gitpython
    is imported here, on the first git command, so read commands and `ct --help` never load it.
    """
    try:
        from git.cmd import Git
        from git.exc import GitCommandError, GitCommandNotFound
    except ImportError as exc:  # gitpython refuses to load without a working git
        if "git executable" not in str(exc).lower():
            raise
        raise GitMissing() from None

    env = dict(env)
    gdir = git_dir(cwd) if args[:1] != ["init"] else None
    if gdir is not None:
        env.update(
            GIT_DIR=str(gdir), GIT_WORK_TREE=str(cwd), GIT_INDEX_FILE=str(Path(gdir) / "index")
        )
    try:
        return Git(str(cwd)).execute(
            ["git", *args],
            env=env,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
            istream=subprocess.DEVNULL,
        )
    except GitCommandNotFound:
        import shutil

        if shutil.which(os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git") is None:
            raise GitMissing() from None
        raise
    except GitCommandError as exc:
        raw = exc.stderr or exc.stdout or ""
        words = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)).strip()
        words = words.removeprefix("stderr: ").strip("'").strip() or f"exit status {exc.status}"
        name = next(a for i, a in enumerate(args) if a != "-c" and (i == 0 or args[i - 1] != "-c"))
        raise GitError(f"git {name} failed in {cwd}: {words}") from None


def unfinished_operation(root: Path) -> tuple[str, str, str] | None:
    """(what, how to finish, how to abort) for a merge, rebase, cherry-pick or revert git is in the
    middle of, or None. Costs a few stats; no git process."""
    gdir = git_dir(root)
    if gdir is None:
        return None
    for name, what, finish, abort in UNFINISHED:
        if (gdir / name).exists() and not _merge_done(gdir, name):
            return what, finish, abort
    return None


def _merge_done(gdir: Path, name: str) -> bool:
    """A post-merge hook runs while MERGE_HEAD is still there, after git committed the merge: the
    hook names that MERGE_HEAD (checked by upkeep/hooks.finished_merge) in MEMSTORE_MERGE_DONE."""
    done = os.environ.get("MEMSTORE_MERGE_DONE")
    if name != "MERGE_HEAD" or not done:
        return False
    try:
        return (gdir / name).read_text().strip() == done
    except OSError:
        return False


def refuse_if_unfinished(root: Path, doing: str = "write to the store") -> None:
    """A write now would commit (or roll back) half of git's operation: stop with what to run instead."""
    state = unfinished_operation(root)
    if state is None:
        return
    from .errors import MemstoreError

    what, finish, abort = state
    raise MemstoreError(
        f"{root}: git is in the middle of {what}, so ct will not {doing} now "
        "(it would commit or roll back part of it).",
        f'Finish it with "{finish}" (after resolving any conflicts: git status lists them) or undo it '
        f'with "{abort}", then run the command again. Nothing was changed.',
    )


def blame_line(path: Path, line: int) -> list[str] | None:
    """`git blame --porcelain` of one line of a file (its rows; [] when git knows no such line,
    e.g. the file is not committed), or None when git could not be run."""
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(path.parent),
                "blame",
                "--porcelain",
                "-L",
                f"{line},{line}",
                "--",
                path.name,
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines() if out.returncode == 0 else []


def run_git(args, cwd=None, env=None, check: bool = True) -> str:
    """`git ARGS…` as a plain process, its stdout as text (for the benchmarks, which time git's own
    commands on stores and on the source checkout); GitError when it fails and `check` is set."""
    try:
        proc = subprocess.run(
            ["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True
        )
    except OSError as exc:
        raise GitError(f"git could not be run: {exc}") from None
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(map(str, args))} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout
