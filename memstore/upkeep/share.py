"""share: private records made shared (docs/format.md, "Records" and "Private lines"), in one
commit: each record's line loses its `scope` and, in an encrypted store, is sealed again under the
team's newest key epoch in place of the writer's private key. The preview (`dry_run`) is the text
of each record with the secrets the scanner (memstore/secrets/) flags, for review first."""

from __future__ import annotations

from ..errors import UsageError
from ..format import log as logfmt
from ..format import record as recordfmt
from ..index.browse import records_by_id
from ..results import ShareResult


def share(store, ids, dry_run: bool = False) -> ShareResult:
    """Share the private records `ids` (one commit); `dry_run` only shows what would be shared,
    and with no ids lists every private record this user reads (the review queue). An id that
    names no record this user can read is an error, and nothing is changed."""
    from ..index.queries import private_ids
    from ..secrets.detect import scan

    wanted = list(dict.fromkeys(str(i) for i in ([ids] if isinstance(ids, str) else ids or [])))
    index = store.index()
    if not wanted and dry_run:
        wanted = private_ids(index)
        if not wanted:
            return ShareResult(dry_run=True)
    if not wanted:
        raise UsageError(
            "give the id of at least one private record to share",
            "Nothing was shared. ct share -n (no ids) lists your private records.",
        )
    found = {r["id"]: r for r in records_by_id(index, wanted)}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise UsageError(
            f"no record {missing[0]!r} that you can read in {store.root}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ": an unknown or forgotten id, or another writer's private record.",
            "Nothing was shared. Find ids with: ct search QUERY --scope private --json",
        )
    res = ShareResult(dry_run=dry_run)
    todo = []
    for rid in wanted:
        rec = found[rid]
        if not recordfmt.is_private(rec):
            res.already.append(rid)
            continue
        todo.append(rec)
        res.records.append(
            {
                "id": rid,
                "day": rec["day"],
                "ts": rec["ts"],
                "role": rec["role"],
                "actor": rec.get("actor"),
                "text": rec["text"],
                "secrets": [
                    {"line": f.line, "kind": f.kind, "excerpt": f.excerpt_redacted}
                    for f in scan(rec["text"])
                ],
            }
        )
    if res.already:
        res.notes.append(f"{len(res.already)} of the records are shared already: left as they are")
    if dry_run or not todo:
        return res
    ids_by_day: dict[str, set[str]] = {}
    for rec in todo:
        ids_by_day.setdefault(rec["day"], set()).add(rec["id"])
    n = len(todo)
    with store.transaction(f"Share {n} private record{'s' if n != 1 else ''}") as tx:
        for day, day_ids in sorted(ids_by_day.items()):
            path = logfmt.day_path(store.root, day)
            logfmt.rewrite(path, _shared(logfmt.read_plain(path), day_ids))
            tx.stage(store.rel(path))
    res.commit = tx.commit
    if res.commit:
        store.index(update=False).take_in(sorted(ids_by_day))
    return res


def _shared(data: bytes, ids: set[str]) -> bytes:
    """A day log's plain lines with the private lines of `ids` made shared, each in its place."""
    out = []
    for raw in data.split(b"\n"):
        if raw and recordfmt.PRIVATE.encode() in raw:
            try:
                rec = recordfmt.loads(raw.decode("utf-8"))
            except (recordfmt.RecordError, UnicodeDecodeError):
                rec = None
            if rec is not None and rec.get("id") in ids and recordfmt.is_private(rec):
                del rec["scope"]
                raw = recordfmt.dumps(rec).encode("utf-8")
        out.append(raw)
    return b"\n".join(out)
