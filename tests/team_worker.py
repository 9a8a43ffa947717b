"""One member of the team load soak (tests/test_team_soak.py): writes its share of records in random
batches (`ct import jsonl` of 1 to MAX_BATCH turns, some single `ct add`s) and syncs after most of them,
with `ct sync` or, for a plain-git member, `git pull --no-rebase` / `--rebase` and `git push`.

Run as a process: `python team_worker.py ROOT SEED RECORDS MODE OUT.json`, MODE `ct` or `git`.
OUT.json gets every id it was told it wrote with its text, the conflicts git or ct stopped on, any
other error, the retries each kind of sync needed (and the ct syncs that gave up after their own
retries and were run again), and how long the member's own commands took.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

CT = [sys.executable, "-m", "memstore"]
MAX_BATCH = 200
RERUNS = 5  # times a member runs a ct sync again that gave up after its own retries
DAYS = ("2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30")


class Member:
    def __init__(self, root: Path, seed: int, mode: str):
        self.root, self.rng, self.mode = root, random.Random(seed), mode
        self.name = root.name
        self.written: dict[str, str] = {}
        self.conflicts: list[str] = []
        self.errors: list[str] = []
        self.retries = 0  # a ct sync's own retries, or a plain push that lost the race
        self.syncs = 0
        self.gave_up = 0  # ct syncs that lost every race and were run again
        self.n = 0

    def run_ct(self, *args) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [*CT, "-C", str(self.root), *map(str, args)], capture_output=True, text=True
        )
        if proc.returncode:
            self.errors.append(f"ct {args[0]} -> {proc.returncode}: {proc.stderr.strip()[-400:]}")
        return proc

    def git(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(self.root), *args], capture_output=True, text=True)

    def text(self) -> str:
        self.n += 1
        token = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(12))
        return f"{self.name} turn {self.n} {token} on the shared release plan"

    def ts(self) -> str:
        day = self.rng.choice(DAYS)
        return f"{day}T{self.rng.randrange(24):02d}:{self.rng.randrange(60):02d}:{self.rng.randrange(60):02d}Z"

    def write(self, left: int) -> int:
        """One batch of at most `left` records; returns how many were written."""
        if self.rng.random() < 0.15:
            text = self.text()
            proc = self.run_ct("add", text, "--ts", self.ts(), "--json")
            if proc.returncode == 0:
                self.written.update(zip(json.loads(proc.stdout)["ids"], [text]))
                return 1
            return 0
        texts = [self.text() for _ in range(min(left, self.rng.randrange(1, MAX_BATCH + 1)))]
        rows = [
            {"ts": self.ts(), "role": self.rng.choice(("user", "assistant")), "text": t}
            for t in texts
        ]
        batch = self.root.parent / f"{self.name}-{self.n}.jsonl"
        batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
        proc = self.run_ct("import", "jsonl", batch, "--json")
        if proc.returncode:
            return 0
        self.written.update(zip(json.loads(proc.stdout)["ids"], texts))  # ids in file order
        return len(texts)

    def sync(self) -> None:
        self.syncs += 1
        if self.mode == "ct":
            for _ in range(1 + RERUNS):
                proc = subprocess.run(
                    [*CT, "-C", str(self.root), "sync", "--json"], capture_output=True, text=True
                )
                if proc.returncode == 0:
                    self.retries += json.loads(proc.stdout).get("retries", 0)
                    return
                if "kept moving" not in proc.stderr:
                    break
                # every member syncs back to back here: a sync that lost every race says so and
                # keeps everything merged; a person runs it again, and so does this member
                self.gave_up += 1
            if "conflict" in proc.stderr.lower():
                self.conflicts.append(f"ct sync: {proc.stderr.strip()[-300:]}")
            else:
                self.errors.append(f"ct sync -> {proc.returncode}: {proc.stderr.strip()[-400:]}")
            return
        how = self.rng.choice(("--no-rebase", "--rebase"))
        for attempt in range(20):
            pull = self.git("pull", "-q", "--no-edit", how)
            if pull.returncode:
                words = pull.stdout + pull.stderr
                if "CONFLICT" in words or "conflict" in words:
                    self.conflicts.append(f"git pull {how}: {words.strip()[-600:]}")
                    self.git("rebase" if how == "--rebase" else "merge", "--abort")
                    return
                self.errors.append(f"git pull {how}: {words.strip()[-300:]}")
                return
            push = self.git("push", "-q")
            if push.returncode == 0:
                return
            if "rejected" not in push.stderr and "fetch first" not in push.stderr:
                self.errors.append(f"git push: {push.stderr.strip()[-300:]}")
                return
            self.retries += 1
            time.sleep(self.rng.uniform(0.05, 0.1 * 2 ** min(attempt, 4)))
        self.errors.append("git push: still rejected after 20 tries")

    def run(self, records: int) -> dict:
        started = time.monotonic()
        left = records
        while left > 0:
            left -= self.write(left)
            if self.errors:
                break
            if self.rng.random() < 0.8:
                self.sync()
        return {
            "written": self.written,
            "conflicts": self.conflicts,
            "errors": self.errors,
            "retries": self.retries,
            "syncs": self.syncs,
            "gave_up": self.gave_up,
            "seconds": time.monotonic() - started,
            "mode": self.mode,
        }


if __name__ == "__main__":
    root, seed, records, mode, out = sys.argv[1:6]
    out_path = Path(out)
    out_path.write_text(json.dumps(Member(Path(root), int(seed), mode).run(int(records))))
