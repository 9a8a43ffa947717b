"""Where each file of a store lives (docs/format.md): the one place that spells the per-day paths.

Paths are relative, with `/`, as git and the journal name them; join them to the store's root for
the disk. Plain strings and pathlib only, so the numpy-free freshness check (index/fresh.py) can use
them too.
"""

from __future__ import annotations

from pathlib import Path

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
