"""The store the web page tests look at: three days of conversation, markers, a secret, a correction,
and one `ct reorganize` that merges topics. Returns what the page is expected to show."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, time, timedelta, timezone
from pathlib import Path

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


# ----- a store of several years, for the page at real scale ---------------------------------------

TZ = "Europe/Berlin"
FIXTURES = Path(__file__).parent / "fixtures" / "importers"
CLAUDE_SESSION = "5f0c1a2e-7b3d-4c8e-9a61-2d4e8f1b3c70"
CLAUDE_TITLE = "Fix flaky budget export test"  # the transcript's summary row
CHATGPT_TITLES = ("Budget planning for Q3", "CSV totals with Python")
# The days the two imports' turns fall on: no random conversation is drawn there, so each opens its
# day whatever today's date makes of the rest (one drawn before 11:00 on 2025-08-14 came first on
# about a quarter of the days from 2027-01-05 on).
IMPORT_DAYS = ("2024-06-10", "2025-08-14")
OPEN_BEFORE = "Finish the migration guide before the release"
OPEN_TODAY = "Where we are now: reviewing the timeline page at real scale"
DONE = "Send the quarterly numbers to Maria"
_WORDS = (
    "garden tomatoes invoice release budget travel Lisbon train piano lesson sourdough bread "
    "database index backup laptop battery marathon training bicycle chain essay draft chapter "
    "meeting notes dentist appointment tax return python script deploy server cache bug"
).split()


def build_years(path, years: int = 3, seed: int = 7):
    """A store in Europe/Berlin with `years` years of turns up to today at varied density (quiet
    stretches, busy months, nothing yet today), ChatGPT and Claude Code imports that carry titles,
    opaque session ids, and markers: one open for weeks, one set today, one done. Returns the
    store and what the page is expected to show."""
    import random
    import uuid
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(TZ)
    rnd = random.Random(seed)
    st = make_store(path, timezone=TZ)
    now = datetime.now(tz)
    today = now.date()
    first = today - timedelta(days=365 * years)
    month_recs: list[dict] = []

    def flush(label):
        if month_recs:
            st.write(list(month_recs), f"Add {len(month_recs)} turns of {label}")
            month_recs.clear()

    day = first
    while day < today:
        # quiet in the first year, a busy month now and then, steady lately
        busy = day.month in (3, 10) and day.year == first.year + 1
        p = 0.15 if day.year == first.year else (0.9 if busy else 0.45)
        if rnd.random() < p and day.isoformat() not in IMPORT_DAYS:
            n = rnd.randint(12, 30) if busy else rnd.randint(1, 6)
            sid = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
            t = datetime(
                day.year, day.month, day.day, rnd.randint(7, 20), rnd.randint(0, 59), tzinfo=tz
            )
            for i in range(n):
                words = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(6, 14)))
                role = "user" if i % 2 == 0 else "assistant"
                text = f"Let us talk about the {words}." if role == "user" else f"Noted: {words}."
                ts = t + timedelta(minutes=3 * i)
                if ts.date() != day:
                    break
                month_recs.append(
                    st.normalize({"ts": ts.isoformat(), "role": role, "text": text, "session": sid})
                )
        nxt = day + timedelta(days=1)
        if nxt.month != day.month:
            flush(day.strftime("%Y-%m"))
        day = nxt
    flush("the last month")
    # Twenty past midnight in Berlin is the evening before in UTC: filed under, and shown on,
    # Berlin's day.
    night = datetime.combine(first + timedelta(days=200), time(0, 20), tz)
    late = st.normalize(
        {
            "ts": night.isoformat(),
            "role": "user",
            "text": "Can't sleep: is the backup done?",
            "session": "night",
        }
    )
    st.write([late], "Add a turn after midnight")
    # Nothing said today yet: the page still opens on today, for its open markers. Two imports
    # whose sources carry titles.
    st.import_("chatgpt", FIXTURES / "chatgpt_conversations.json")
    st.import_("claude-code", FIXTURES / f"{CLAUDE_SESSION}.jsonl")
    done = st.mark(DONE, now=now - timedelta(days=200))
    st.mark(done=done.id, now=now - timedelta(days=190))
    st.mark(OPEN_BEFORE, now=now - timedelta(days=40))
    st.mark(OPEN_TODAY, now=now)
    return st, {
        "today": today.isoformat(),
        "first": first.isoformat(),
        "counts": {d["day"]: d["records"] for d in st.days()},
        "late_day": night.date().isoformat(),
        "late_id": late["id"],
    }
