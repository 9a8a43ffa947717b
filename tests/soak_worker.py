"""One clone of the plain-git soak (tests/test_soak.py): random writes, forgets, marks and gc, synced
by a random mix of `git pull` (merge), `git pull --rebase`, `git push` and `ct sync`.

Run as a process: `python soak_worker.py ROOT SEED ROUNDS OUT.json`. Every id it was told it wrote,
every id it forgot (with its text) and every conflict git stopped on go to OUT.json.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

CT = [sys.executable, "-m", "memstore"]
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


class Clone:
    def __init__(self, root: Path, seed: int):
        self.root, self.rng = root, random.Random(seed)
        self.name = root.name
        self.written: dict[str, str] = {}  # id -> text
        self.forgotten: dict[str, str] = {}
        self.conflicts: list[str] = []
        self.errors: list[str] = []
        self.refused = (
            0  # pushes the pre-push guard refused (a forgotten line a rebase kept), then repaired
        )
        self.n = 0

    def ct(self, *args, check=True):
        proc = subprocess.run(
            [*CT, "-C", str(self.root), *map(str, args)], capture_output=True, text=True
        )
        if check and proc.returncode:
            self.errors.append(
                f"ct {' '.join(map(str, args))} -> {proc.returncode}: {proc.stderr.strip()[-400:]}"
            )
        return proc

    def git(self, *args):
        return subprocess.run(["git", "-C", str(self.root), *args], capture_output=True, text=True)

    def text(self) -> str:
        self.n += 1
        token = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))
        return f"{self.name} note {self.n} {token} about the trip budget"

    def ts(self) -> str:
        return f"{self.rng.choice(DAYS)}T{self.rng.randrange(8, 20):02d}:{self.rng.randrange(60):02d}:00Z"

    def _took(self, proc, texts: list[str]) -> None:
        if proc.returncode == 0:
            ids = json.loads(proc.stdout)["ids"]
            self.written.update(zip(ids, texts))

    # ----- actions ---------------------------------------------------------------------------

    def add(self) -> None:
        text = self.text()
        self._took(self.ct("add", text, "--ts", self.ts(), "--json"), [text])

    def burst(self) -> None:
        """Several one-turn writes to one day: the day's packs reach the consolidation threshold."""
        day = self.rng.choice(DAYS)
        for _ in range(self.rng.randrange(3, 9)):
            text = self.text()
            ts = f"{day}T{self.rng.randrange(8, 20):02d}:{self.rng.randrange(60):02d}:00Z"
            self._took(self.ct("add", text, "--ts", ts, "--json"), [text])

    def import_(self) -> None:
        texts = [self.text() for _ in range(self.rng.randrange(3, 12))]
        f = self.root.parent / f"{self.name}-{self.n}.jsonl"
        rows = [
            {"ts": self.ts(), "role": "user", "session": f"s{self.n}", "text": t} for t in texts
        ]
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        proc = self.ct("import", "jsonl", f, "--json")
        if proc.returncode == 0:  # import ids come in file order
            self.written.update(zip(json.loads(proc.stdout)["ids"], texts))

    def forget(self) -> None:
        """Any record this clone holds, its own or another clone's."""
        held = {i: t for i, t in self.committed().items() if i not in self.forgotten}
        if not held:
            return
        rid = self.rng.choice(sorted(held))
        proc = self.ct("forget", rid, check=False)
        if proc.returncode == 0:
            self.forgotten[rid] = held[rid]
        elif "forgotten already" not in proc.stderr and "no record" not in proc.stderr.lower():
            self.errors.append(
                f"ct forget {rid} -> {proc.returncode}: {proc.stderr.strip()[-400:]}"
            )

    def mark(self) -> None:
        self.ct("mark", f"{self.name} waiting for the hotel {self.n}")

    def gc(self) -> None:
        self.ct("gc")

    def committed(self) -> dict[str, str]:
        """id -> text of the conversation records in this clone's day logs."""
        out = {}
        for path in Path(self.root, "log").rglob("*.jsonl"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                    out[rec["id"]] = rec["text"]
                except (ValueError, KeyError, TypeError):
                    pass
        return out

    # ----- sync ------------------------------------------------------------------------------

    def sync(self) -> None:
        how = self.rng.choice(("merge", "rebase", "ct", "merge", "rebase"))
        for _ in range(12):
            if how == "ct":
                proc = self.ct("sync", check=False)
                if proc.returncode == 0:
                    return
                if "conflict" in proc.stderr.lower():
                    self.conflicts.append(f"ct sync: {proc.stderr.strip()[-300:]}")
                    return
                time.sleep(self.rng.uniform(0.05, 0.3))
                continue
            pull = self.git(
                "pull", "-q", "--no-edit", "--rebase" if how == "rebase" else "--no-rebase"
            )
            if pull.returncode:
                words = pull.stdout + pull.stderr
                if "CONFLICT" in words or "conflict" in words:
                    self.conflicts.append(f"git pull --{how}: {words.strip()[-600:]}")
                    self.git("rebase" if how == "rebase" else "merge", "--abort")
                    return
                time.sleep(self.rng.uniform(0.05, 0.3))
                continue
            push = self.git("push", "-q")
            if push.returncode == 0:
                return
            if (
                "push refused" in push.stderr
            ):  # the pre-push guard: a rebase kept a forgotten line; do as it says
                self.refused += 1
                self.ct("fsck", "--repair", check=False)
                continue
            if "rejected" not in push.stderr and "fetch first" not in push.stderr:
                self.errors.append(f"git push: {push.stderr.strip()[-300:]}")
                return
            time.sleep(self.rng.uniform(0.05, 0.3))

    def run(self, rounds: int) -> dict:
        actions = [
            self.add,
            self.add,
            self.burst,
            self.import_,
            self.forget,
            self.forget,
            self.mark,
            self.gc,
        ]
        for _ in range(rounds):
            self.rng.choice(actions)()
            if self.rng.random() < 0.6:
                self.sync()
        return {
            "written": self.written,
            "forgotten": self.forgotten,
            "conflicts": self.conflicts,
            "errors": self.errors,
            "refused": self.refused,
        }


if __name__ == "__main__":
    root, seed, rounds, out = (
        Path(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        Path(sys.argv[4]),
    )
    out.write_text(json.dumps(Clone(root, seed).run(rounds)))
