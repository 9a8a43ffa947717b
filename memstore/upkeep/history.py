"""The memory's history, read from git: each commit with the records it added per file kind."""

from __future__ import annotations


def history(store, max_count: int = 20) -> list[dict]:
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
                "date": c["date"],
                "author": c["author"],
                "subject": c["subject"],
                "counts": counts,
                "files": len(c["files"]),
            }
        )
    return out
