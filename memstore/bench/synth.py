"""Synthetic stores for the speed benchmark: deterministic chat-like records written in store format.

Building a 100k-record store through `Store.write` would embed and place every record in the topic
tree, so the builder writes the same files through the store's own file writer (one pack per day and day-log
appends) with precomputed vectors and makes one git commit — the write path minus embedding. Built stores are
cached under `.bench/` keyed by size, records per day and vector dtype, so reruns are fast.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from ..format import log as logfmt
from ..format import record as recordfmt

# Words a person and an assistant might use; the rest of the vocabulary is made of syllables so
# that the word-frequency tail is long (Zipf), as in real conversation.
COMMON = """budget trip hotel flight meeting deadline design review schedule invoice contract
travel berlin paris tokyo london summer winter report draft client server deploy release bug test
database index query search memory embedding vector model prompt token cache latency storage backup
garden recipe dinner lunch coffee train ticket museum concert birthday gift doctor appointment
insurance rent apartment kitchen bicycle marathon running swimming yoga guitar piano novel chapter
essay thesis paper lecture exam grade homework project milestone roadmap sprint standup retro
hiring interview salary offer team manager feedback goal plan idea decision question answer
problem solution error warning log metric dashboard alert incident outage postmortem migration
schema table column python rust golang javascript typescript docker kubernetes cluster node
network firewall certificate password account login email calendar reminder note todo list
photo camera video podcast music playlist movie series book library coffee tea wine beer pizza
pasta salad soup bread cheese chocolate market grocery pharmacy bank loan mortgage tax refund
""".split()
# Bumped whenever generated stores would differ, so that stale caches under .bench/ are not reused.
SYNTH_VERSION = 3
_SYL = "ka ri to mo ne su la vi de po an el or um is ba ge fi lo nu ta ke ru ma zo".split()


def vocabulary(size: int = 6000, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    words = list(dict.fromkeys(COMMON))
    seen = set(words)
    syl = np.array(_SYL)
    while len(words) < size:
        for parts in rng.integers(0, len(syl), size=(size, 3)):
            w = "".join(syl[parts[: 2 + parts[0] % 2]])
            if w not in seen:
                seen.add(w)
                words.append(w)
                if len(words) == size:
                    break
    return words


class TextSource:
    """Deterministic sentences with Zipf-Mandelbrot word frequencies and a share of stop words.

    p(rank) ∝ 1/(rank + 50): the commonest content word is in about 9% of records and a word of
    rank 1500 in 0.3%, as in a long chat history once stop words are dropped (plain Zipf would put
    the top word in nearly every record and make every keyword query match most of the store).
    """

    def __init__(self, seed: int = 11, vocab_size: int = 6000):
        self.words = np.array(vocabulary(vocab_size))
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        p = 1.0 / (ranks + 50.0)
        self.p = p / p.sum()
        self.rng = np.random.default_rng(seed)
        self.glue = np.array("the a we to of and is for about on it that".split())

    def texts(self, n: int) -> list[str]:
        """`n` sentences of 8-39 words; words drawn in one batch (per-sentence sampling is slow)."""
        lengths = self.rng.integers(8, 40, size=n)
        picks = self.rng.choice(len(self.words), size=int(lengths.sum()), p=self.p)
        glue = self.rng.integers(0, len(self.glue), size=int(lengths.sum()))
        words, gl = self.words.tolist(), self.glue.tolist()
        out, pos = [], 0
        for ln in lengths.tolist():
            parts = []
            for i in range(ln):
                parts.append(words[picks[pos + i]])
                if i % 3 == 1:
                    parts.append(gl[glue[pos + i]])
            pos += ln
            s = " ".join(parts)
            out.append(s[0].upper() + s[1:] + ".")
        return out

    def queries(self, n: int, seed: int = 5) -> list[str]:
        """Two- or three-word queries over mid-frequency words (neither stop words nor hapaxes)."""
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            k = int(rng.integers(2, 4))
            idx = rng.integers(5, 1500, size=k)
            out.append(" ".join(str(self.words[i]) for i in idx))
        return out


def synth_records(n: int, per_day: int, start: str = "2023-01-01", seed: int = 11) -> list[dict]:
    """`n` canonical records, `per_day` to a day, alternating user/assistant within sessions."""
    texts = TextSource(seed).texts(n)
    day0 = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    recs = []
    for i in range(n):
        day, k = divmod(i, per_day)
        ts = day0 + timedelta(days=day, seconds=8 * 3600 + k * (14 * 3600 // max(per_day, 1)))
        role = "user" if k % 2 == 0 else "assistant"
        raw = {
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "role": role,
            "text": texts[i],
            "session": f"s{day:05d}-{k // 20}",
            "model": None if role == "user" else "bench-model",
        }
        rec = recordfmt.normalize(raw, timezone.utc, derive_id=True)
        recs.append(rec)
    return recs


def write_records(store, records: list[dict], vectors: np.ndarray) -> list[str]:
    """Write one pack per day and the day-log lines through the store's own file writer (no embedding, no commit).

    Returns the store-relative paths touched, for one commit.
    """
    return store._write_files(records, vectors)


def embed_hash(texts: list[str], dim: int = 384) -> np.ndarray:
    from ..adapters.hashing import HashEmbedder

    emb = HashEmbedder(dim)
    return (
        np.concatenate([emb.embed_batch(texts[i : i + 2048]) for i in range(0, len(texts), 2048)])
        if texts
        else np.zeros((0, dim), np.float32)
    )


def build_store(base: Path, n: int, per_day: int = 100, dtype: str = "float32", log=print):
    """The cached synthetic store for (n, per_day, dtype): built once, then reused.

    Vectors come from the hashing embedder (deterministic, and the store declares it, so `ct
    search` embeds queries the same way). A `built.json` marker is written last; a folder
    without it is a half-built leftover and is rebuilt.
    """
    from ..store import Store

    root = Path(base) / f"store-v{SYNTH_VERSION}-{n}-{per_day}-{dtype}"
    marker = root / ".memstore" / "built.json"
    if marker.is_file():
        store = Store.open(root, search_parents=False)
        return store, json.loads(marker.read_text())
    if root.exists():
        shutil.rmtree(root)
    t0 = time.perf_counter()
    store = Store.init(root, embedder="hash", timezone="UTC", dtype=dtype)
    recs = synth_records(n, per_day)
    t1 = time.perf_counter()
    vecs = embed_hash([r["text"] for r in recs])
    t2 = time.perf_counter()
    paths = write_records(store, recs, vecs)
    t3 = time.perf_counter()
    store.git.commit(f"Import {n} synthetic records (benchmark)", ["log", "packs"])
    t4 = time.perf_counter()
    info = {
        "n": n,
        "per_day": per_day,
        "dtype": dtype,
        "days": len(paths) // 2,
        "seconds": {"records": t1 - t0, "embed": t2 - t1, "files": t3 - t2, "commit": t4 - t3},
    }
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(json.dumps(info))
    log(
        f"built {root.name}: records {t1 - t0:.1f}s, embed {t2 - t1:.1f}s, files {t3 - t2:.1f}s, commit {t4 - t3:.1f}s"
    )
    return store, info


def next_day_records(store, per_day: int, seed: int = 99) -> list[dict]:
    """`per_day` new records on the day after the store's last day (for the incremental reindex)."""
    last = max(logfmt.list_days(store.root))
    nxt = (datetime.fromisoformat(last) + timedelta(days=1)).strftime("%Y-%m-%d")
    texts = TextSource(seed).texts(per_day)
    out = []
    for k in range(per_day):
        raw = {
            "ts": f"{nxt}T12:{k // 60 % 60:02d}:{k % 60:02d}Z",
            "role": "user" if k % 2 == 0 else "assistant",
            "text": texts[k],
            "session": f"new-{nxt}",
        }
        out.append(recordfmt.normalize(raw, timezone.utc, derive_id=True))
    return out
