"""What `ct sync` must do again after it moved this clone onto the remote (a rewritten history, a
store encrypted on another clone, keys two clones changed at once): this clone's change of readers
to make again, its unpushed records to write again, its unpushed forgets to apply again.

It is written to `memstore-reapply.json` in the clone's git folder (mode 0600: never in the work
tree, where a pushed commit could put a file of that name under .memstore/, which git overwrites
as an ignored file) before the move, and removed once all of it is done, so a sync killed in
between finishes it the next time it runs; until then git's reflog also holds the commits it came
from (nothing is pruned before it is done, and the pruning is part of what is kept).
"""

from __future__ import annotations

import json
import os

from .errors import FormatError

FILE = "memstore-reapply.json"


def _path(store):
    from .gitrepo import git_dir

    return git_dir(store.root) / FILE


def save(store, records: list[dict], added=(), removed=(), forget=(), expire=None) -> None:
    """`expire`: the old history is dropped once done (records read from forgotten lines, whose
    text is scrubbed from this machine then), or None: it is kept."""
    body = {
        "added": sorted(added),
        "removed": sorted(removed),
        "forget": sorted(forget),
        "records": records,
        "expire": expire,
    }
    path = _path(store)
    tmp = path.with_name(FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(body, f, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(store) -> dict | None:
    from . import storefile
    from .format import safejson

    path = _path(store)
    try:
        data = storefile.read_bytes(path, root=path.parent)
    except FileNotFoundError:
        return None
    try:
        body = safejson.loads(data)
        assert isinstance(body, dict)
        assert all(isinstance(body.get(k), list) for k in ("added", "removed", "forget", "records"))
        assert all(isinstance(r, dict) for r in body["records"])
        assert body.get("expire") is None or isinstance(body["expire"], list)
    except (ValueError, AssertionError):
        raise FormatError(
            path,
            "is not what ct sync left to write again after moving this clone",
            hint="Its records are also in git's reflog (git reflog; git show HEAD@{1}). Move it "
            "aside to go on.",
        ) from None
    return body


def clear(store) -> None:
    try:
        _path(store).unlink()
    except FileNotFoundError:
        pass
