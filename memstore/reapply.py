"""What `ct sync` must do again after it moved this clone onto the remote (a rewritten history, a
store encrypted on another clone, keys two clones changed at once): this clone's change of readers
to make again, its unpushed records to write again, its unpushed forgets to apply again.

It is written to `.memstore/reapply.json` (mode 0600) before the move and removed once all of it
is done, so a sync killed in between finishes it the next time it runs; until then git's reflog
also holds the commits it came from (nothing is pruned before it is done).
"""

from __future__ import annotations

import json
import os

from .errors import FormatError

FILE = "reapply.json"


def save(store, records: list[dict], added=(), removed=(), forget=()) -> None:
    body = {
        "added": sorted(added),
        "removed": sorted(removed),
        "forget": sorted(forget),
        "records": records,
    }
    store.meta_dir.mkdir(parents=True, exist_ok=True)
    path = store.meta_dir / FILE
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

    path = store.meta_dir / FILE
    try:
        data = storefile.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        body = safejson.loads(data)
        assert isinstance(body, dict)
        assert all(isinstance(body.get(k), list) for k in ("added", "removed", "forget", "records"))
        assert all(isinstance(r, dict) for r in body["records"])
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
        (store.meta_dir / FILE).unlink()
    except FileNotFoundError:
        pass
