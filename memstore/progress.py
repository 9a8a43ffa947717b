"""Progress of long work, told to whoever asked for it: a callable `progress(n)` that counts steps,
which may also have `stage(desc, total)` to say a new part of the work began (the CLI's bar does:
memstore/cli/common.py). Library callers pass nothing, or any callable; both forms are safe here.
"""

from __future__ import annotations


def stage(progress, desc: str, total: int | None = None) -> None:
    """Tell `progress` that the part of the work called `desc` (of `total` steps) starts now."""
    start = getattr(progress, "stage", None)
    if start is not None:
        start(desc, total)


def tick(progress, n: int = 1) -> None:
    if progress is not None:
        progress(n)
