"""The store the web page tests look at: three days of conversation, markers, a secret, a correction,
and one `ct reorganize` that merges topics. Returns what the page is expected to show."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from conftest import ct, make_store
from tree_scenarios import DISTRACTORS, THESEUS, branchy, converse

SECRET = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
DAYS = ("2026-11-02", "2026-11-03", "2026-11-05")


def build(path):
    """The store at `path` and a dict of expectations (days, counts, ids, topic and merge numbers)."""
    st = branchy(make_store(path))
    talk = []
    for i, ex in enumerate(THESEUS):
        talk += [ex, DISTRACTORS[i % len(DISTRACTORS)]]
    # 8 exchanges on the first day, 8 on the second, 4 on the third: (16, 16, 8) records
    ids = converse(st, talk[:8], start=f"{DAYS[0]}T09:00:00")
    ids += converse(st, talk[8:16], start=f"{DAYS[1]}T14:00:00")
    ids += converse(st, talk[16:20], start=f"{DAYS[2]}T08:30:00")
    secret = (
        st.add(
            f"Here is my GitHub token {SECRET} for the deploy script.",
            role="user",
            session="ops",
            ts=f"{DAYS[2]}T18:00:00Z",
            allow_secrets=True,
        )
        if _add_takes_allow_secrets(st)
        else st.add(
            f"Here is my GitHub token {SECRET} for the deploy script.",
            role="user",
            session="ops",
            ts=f"{DAYS[2]}T18:00:00Z",
        )
    )
    # A correction: the second record supersedes the first, which must not be shown.
    old = st.normalize(
        {
            "ts": f"{DAYS[1]}T20:00:00Z",
            "role": "user",
            "session": "ops",
            "text": "The standup moves to 9:15 on Mondays.",
        }
    )
    st.write([old], "Add a turn that is corrected next")
    new = st.normalize(
        {
            "ts": f"{DAYS[1]}T20:05:00Z",
            "role": "user",
            "session": "ops",
            "text": "Correction: the standup moves to 9:45 on Mondays.",
            "supersedes": [old["id"]],
        }
    )
    st.write([new], "Correct the standup time")
    st.mark(
        "Compare the Ship of Theseus views in the essay",
        now=datetime(2026, 11, 3, 15, 0, tzinfo=timezone.utc),
    )
    ct("-C", st.root, "reorganize", "--threshold", "0.3")
    from memstore.format import tree as treefmt
    from memstore.tree.diff import tree_diff

    counts = Counter(
        {DAYS[0]: 16, DAYS[1]: 16 + 1, DAYS[2]: 8 + 1}
    )  # the corrected turn is not counted
    diff = tree_diff(st, "HEAD~1", "HEAD")
    tree = treefmt.read(st.root)
    return st, {
        "counts": dict(counts),
        "theseus_ids": ids,
        "secret_id": secret.added[0]["id"],
        "superseded": old["id"],
        "correction": new["id"],
        "merges": len(diff.merged),
        "topics": len(tree.topics),
        "tree": tree,
    }


def _add_takes_allow_secrets(st) -> bool:
    import inspect

    return "allow_secrets" in inspect.signature(st.add).parameters
