"""The memory's history, read from git: each commit with the records it added per file kind."""

from __future__ import annotations

import datetime as dt


def _on_store_clock(date: str, tz) -> str:
    """A commit's date (git's ISO 8601, in the committer's own offset) on the store's clock, as every
    other view shows times; git's text where it does not parse."""
    try:
        return dt.datetime.fromisoformat(date).astimezone(tz).isoformat()
    except ValueError:
        return date


def history(store, max_count: int = 20) -> list[dict]:
    """Commits newest first: sha, date (on the store's clock), author and author_email, signature
    (None when unsigned, else whether git verifies it: gitrepo.signature), subject and counts per
    kind."""
    out = []
    for c in store.git.log(max_count=max_count):
        counts = {"records": 0, "packs": 0, "segments": 0, "markers": 0, "tree": 0}
        for f in c["files"]:
            p = f["path"]
            if p.startswith("log/"):
                counts["records"] += f["added"]
            elif p.startswith("packs/"):
                counts["packs"] += 1
            elif p.startswith("segments/"):
                counts["segments"] += 1
            elif p == "markers.jsonl":
                counts["markers"] += f["added"]
            elif p == "tree.json" or p.startswith("tree/"):
                counts["tree"] += 1
        out.append(
            {
                "sha": c["sha"],
                "date": _on_store_clock(c["date"], store.tz),
                "author": c["author"],
                "author_email": c["author_email"],
                "signature": c["signature"],
                "subject": c["subject"],
                "counts": counts,
                "files": len(c["files"]),
            }
        )
    return out
