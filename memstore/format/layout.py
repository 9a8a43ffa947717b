"""Where each file of a store lives (docs/format.md): the one place that spells the per-day paths.

Paths are relative, with `/`, as git and the journal name them; join them to the store's root for
the disk. Plain strings and pathlib only, so the numpy-free freshness check (index/fresh.py) can use
them too.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import config as configfmt

META_DIR = ".memstore"  # the disposable index, locks and caches: never committed
GITIGNORE = f"/{META_DIR}/\n"
GITATTRIBUTES = """\
# memstore (docs/format.md): every file merges with git's built-in rules, no merge driver.
# Append-only JSONL merges by union (each line stands alone; readers tolerate repeats); .is is binary.
log/**/*.jsonl merge=union
tree/**/*.jsonl merge=union
markers.jsonl merge=union
forgotten.jsonl merge=union
*.is binary
"""
LOG = "log"  # log/YYYY/YYYY-MM-DD.jsonl: the day logs, the source of truth
PACKS = "packs"  # packs/YYYY/YYYY-MM-DD/<hash>.pack: format 2's vectors and blobs
SEGMENTS = "segments"  # segments/YYYY/YYYY-MM-DD/: format 1's .is segments


def day_log(day: str) -> str:
    return f"{LOG}/{day[:4]}/{day}.jsonl"


def pack_dir(day: str) -> str:
    return f"{PACKS}/{day[:4]}/{day}"


def segment_dir(day: str) -> str:
    return f"{SEGMENTS}/{day[:4]}/{day}"


def safe_path(root: Path, rel: str) -> Path:
    """`root/rel`, refusing absolute paths and paths that climb out of the store."""
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise ValueError(f"path {rel!r} escapes the store")
    return root / p


def find_root(start: Path | None = None) -> Path:
    """The store at or above `start` (or MEMSTORE_DIR); NotAStoreError when there is none."""
    from ..errors import NotAStoreError

    env = os.environ.get("MEMSTORE_DIR")
    if start is None and env:
        start = Path(env)
        if (start / configfmt.FILENAME).is_file():
            return start.resolve()
        raise NotAStoreError(start)
    here = Path(start or Path.cwd()).resolve()
    for p in [here, *here.parents]:
        if (p / configfmt.FILENAME).is_file():
            return p
    raise NotAStoreError(here)


def meta_dir_for(root: Path) -> Path:
    """Where the disposable index, caches and locks live: `.memstore/` in the store, or, when the
    store cannot be written here (a read-only mount, another user's store), a folder of this user's
    cache named after the store's path, so reads still work (the index is built there once)."""
    own = Path(root) / META_DIR
    if os.path.islink(own) or (os.path.lexists(own) and not os.path.isdir(own)):
        from ..storefile import StoreLink  # the index, locks and journal are never put elsewhere

        raise StoreLink(
            own, "is a symbolic link or not a folder; it is disposable: remove it and run again"
        )
    if _can_write(own if own.exists() else Path(root)):
        return own
    import hashlib

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / "memstore" / "read-only-stores" / f"{Path(root).name}-{key}"


def _can_write(path: Path) -> bool:
    return os.access(path, os.W_OK)


# The committed files made of lines an encrypted store seals one by one (store-relative, `/`).
SEALED_LINE_FILES = (
    r"^((log|tree)/.+\.jsonl|markers\.jsonl|forgotten\.jsonl|purged-history\.jsonl)$"
)
