"""Where on this disk a forgotten text still is: every byte of every file under the folders given
(a store's .memstore/, the embedding cache's folder, a .git/), searched for the text (UTF-8, raw
and JSON-escaped), words only it held, its sha256 as a cache key (raw and hex) and the float32 and
float16 bytes of its vectors.

SQLite splits a blob longer than about 1,000 bytes over overflow pages, so a vector is looked for
in pieces: every run of 16 of its values (at float boundaries) that holds at least 3 non-zero ones
is a needle of its own, and finding any of them counts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def needles(text: str, words=(), vectors=(), key_hash: bool = False) -> dict[str, bytes]:
    """{what: bytes} to look for."""
    out = {"text": text.encode("utf-8"), "text (JSON)": json.dumps(text)[1:-1].encode("utf-8")}
    out |= {f"word {w!r}": w.encode("utf-8") for w in words}
    if key_hash:
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        out |= {"sha256 key": digest, "sha256 hex": digest.hex().encode()}
    for i, vec in enumerate(vectors):
        vec = np.asarray(vec, np.float32)
        for kind, arr in (("float32", vec), ("float16", vec.astype(np.float16))):
            for start in range(0, len(arr) - 15, 16):
                piece = arr[start : start + 16]
                if np.count_nonzero(piece) >= 3:
                    out[f"vector {i} ({kind}, values {start}-{start + 15})"] = piece.tobytes()
    return out


def copies(folders, text: str, words=(), vectors=(), key_hash: bool = False) -> list[str]:
    """'PATH: WHAT' for each file under `folders` holding one of the needles (empty: none left)."""
    looked = needles(text, words, vectors, key_hash)
    hits = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if not path.is_file():
                continue
            data = path.read_bytes()
            hits += [f"{path}: {what}" for what, needle in looked.items() if needle in data]
    return hits
