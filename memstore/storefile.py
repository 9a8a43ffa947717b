"""Opening a store's own files (ground): only regular files, never through a symbolic link.

Every file of a store may come from a stranger (`git pull`, a copied `.memstore/`), and git
commits symlinks. So a path inside the store whose component from the store's root down is a
link (log/2026 -> /elsewhere, markers.jsonl -> ~/notes, .memstore/index.lock -> /etc/x), or whose
file is not a regular one (a FIFO, /dev/zero), is damage: `StoreLink` names it, reads skip it
like any damaged file, writes refuse and change nothing. Only the paths actually opened are
checked (a few lstat calls each), never a walk of the store. The store's root itself may be a link
(the user chose it); what lies under it may not. docs/format.md, "Damage".

This module imports only `errors`, so format/, locking and repair may all use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import FormatError

# The names that may sit at a store's top: the nearest one above a path marks the store's root.
TOP = frozenset(
    {
        "log",
        "packs",
        "tree",
        "segments",
        "keys",
        ".memstore",
        "markers.jsonl",
        "forgotten.jsonl",
        "purged-history.jsonl",
        "tree.json",
        "memstore.toml",
        ".gitattributes",
        ".gitignore",
    }
)
HINT = (
    "A store's files must be regular files inside it. Remove the link or special file "
    '(for a committed one: "git rm" it and restore the file from an older commit), '
    "then run: ct fsck"
)
META_HINT = (
    ".memstore/ is disposable (the index, locks and caches): remove the link or special file, "
    "or the whole folder, and run the command again"
)
NOT_FOLLOWED = "memstore does not follow links inside a store"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class StoreLink(FormatError, OSError):
    """A store path that is, or passes through, a symbolic link, or is not a regular file.

    An OSError too, so every reader that already skips an unreadable file skips this one."""

    def __init__(self, path, problem: str):
        meta = ".memstore" in Path(os.fspath(path)).parts
        FormatError.__init__(self, path, problem, hint=META_HINT if meta else HINT)


_ROOTS: set[str] = set()  # folders seen holding memstore.toml: one stat per store, not per file


def root_of(path) -> str | None:
    """The store root above `path`: the nearest folder that holds memstore.toml above one of the
    top-level names (log/, packs/, .memstore/, markers.jsonl, ...); None when there is none (a
    path outside any store: then only its last component is checked). Plain strings: this runs
    for every file a search opens."""
    p = os.path.abspath(os.fspath(path))
    end = len(p)
    while (cut := p.rfind(os.sep, 0, end)) > 0:
        if p[cut + 1 : end] in TOP:
            base = p[:cut]
            if base in _ROOTS or os.path.isfile(os.path.join(base, "memstore.toml")):
                _ROOTS.add(base)
                return base
        end = cut
    return None


def check(path, root=None, *, file: bool = True, last: bool = True) -> None:
    """Refuse (StoreLink) `path` when a component below the store root is a symlink, or when it
    exists and is not a regular file (`file`) / a folder (not `file`). Missing parts are fine.
    Without `last`, only the folders above the path are looked at (the caller opens the file
    itself with O_NOFOLLOW and checks what it got)."""
    p = os.path.abspath(os.fspath(path))
    base = os.path.abspath(os.fspath(root)) if root is not None else root_of(p)
    if base is None:
        return
    if not p.startswith(base + os.sep):
        raise StoreLink(p, f"is outside the store {base}")
    names = p[len(base) + 1 :].split(os.sep)
    here = base
    for i, name in enumerate(names if last else names[:-1]):
        here = f"{here}{os.sep}{name}"
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return
        except NotADirectoryError:
            raise StoreLink(p, f"{os.path.dirname(here)} is not a folder") from None
        end = i == len(names) - 1
        if stat.S_ISLNK(mode):
            what = "is a symbolic link" if end else f"passes through a symbolic link ({here})"
            raise StoreLink(p, f"{what}; {NOT_FOLLOWED}")
        if not (stat.S_ISREG(mode) if end and file else stat.S_ISDIR(mode)):
            raise StoreLink(here, f"is not {'a regular file' if end and file else 'a folder'}")


def check_db(path, root=None) -> None:
    """`check` for an SQLite file and the files SQLite opens beside it (its WAL, shared memory
    and rollback journal), which it would otherwise follow wherever a link points."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        check(f"{os.fspath(path)}{suffix}", root)


def open_fd(path, flags: int = os.O_RDONLY, mode: int = 0o644, root=None) -> int:
    """os.open for a store file: parents checked, the file opened with O_NOFOLLOW and refused
    unless it is a regular file (a FIFO is opened non-blocking, so it cannot hang the caller)."""
    check(path, root, last=False)
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode)
    except OSError as exc:
        if os.path.islink(path):  # ELOOP (Linux) or EMLINK (BSD): a link made meanwhile
            raise StoreLink(path, f"is a symbolic link; {NOT_FOLLOWED}") from None
        raise exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreLink(path, "is not a regular file")
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path, mode: str = "rb", root=None):
    """A binary file object (modes rb, r+b, ab) for a store file, opened as `open_fd` does."""
    flags = {"rb": os.O_RDONLY, "r+b": os.O_RDWR, "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT}
    return open(open_fd(path, flags[mode], root=root), mode)


def read_bytes(path, root=None, limit: int | None = None) -> bytes:
    """A store file's bytes (a regular file: it ends). With `limit`, a bigger file is refused."""
    with open_file(path, root=root) as f:
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise FormatError(path, f"is larger than {limit} bytes; memstore never writes it so big")
    return data


def read_text(path, root=None, limit: int | None = None) -> str:
    return read_bytes(path, root, limit).decode("utf-8")


def mkdirs(folder, root=None) -> None:
    """Make a store folder and its parents, refusing one that passes through a link."""
    check(folder, root, file=False)
    Path(folder).mkdir(parents=True, exist_ok=True)


def truncate(path, size: int, root=None) -> None:
    """Cut a store file to `size` bytes through an fd opened without following links (never
    os.truncate on a path, which follows a link to wherever it points)."""
    fd = open_fd(path, os.O_WRONLY, root=root)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
