"""fsck's look for symbolic links and special files in a store, which memstore never follows.

A link committed to git (log/2026/2026-01-05.jsonl -> ~/notes, packs/2026 -> /tmp) or left in a
copied `.memstore/` would make reads and writes land outside the store; memstore/storefile.py
refuses each one where it is opened, and this names them all, with what to do (docs/format.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..format import layout

FOLDERS = ("log", "packs", "tree", "segments", "keys")
FILES = (
    "memstore.toml",
    "markers.jsonl",
    "forgotten.jsonl",
    "purged-history.jsonl",
    "tree.json",
    ".gitattributes",
)
FIX = (
    'memstore never follows it: remove it ("git rm" a committed one) and put the real file back '
    '(e.g. from an older commit: "git log -- PATH")'
)
META_FIX = "remove it: .memstore/ is disposable, and the next command makes what it needs"


def check_links(store, rep) -> None:
    """Damage for each link or special file under the store's folders, at its top and in .memstore/."""
    root = store.root
    for top in FOLDERS:
        base = root / top
        if _named(root, base, rep, folder=True):
            continue
        for dirpath, dirnames, filenames in os.walk(base):  # never descends into a linked folder
            folder = Path(dirpath)
            for name in (*dirnames, *filenames):
                _named(root, folder / name, rep, folder=name in dirnames)
    for name in FILES:
        _named(root, root / name, rep, folder=False)
    meta = root / layout.META_DIR
    if store.meta_dir == meta and meta.is_dir():
        for entry in os.scandir(meta):
            if entry.is_symlink() or not (entry.is_file() or entry.is_dir()):
                _named(root, Path(entry.path), rep, folder=entry.is_dir(), fix=META_FIX)


def _named(root: Path, path: Path, rep, folder: bool, fix: str = FIX) -> bool:
    """Name `path` as damage when it is a link, or not a regular file (a folder when `folder`);
    True when it was named (or is absent)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    rel = path.relative_to(root).as_posix()
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.readlink(path)
        except OSError:
            to = "?"
        rep.damage.append(f"{rel}: is a symbolic link (to {to}); {fix}")
        return True
    if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
        what = "a folder" if folder else "a regular file"
        rep.damage.append(f"{rel}: is not {what} (a FIFO, device or socket?); {fix}")
        return True
    return False
