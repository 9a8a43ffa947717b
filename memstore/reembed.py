"""reembed: re-embed every record with the store's (or a new) embedder, in one commit."""

from __future__ import annotations

import os

from . import adapters
from .format import config as configfmt
from .format import log as logfmt
from .format.segment import Header, encode_vector, read_segment, segment_name
from .store import EMBED_CHARS


def reembed(store, embedder_name: str | None = None, options: dict | None = None, batch: int = 256) -> dict:
    """Vector segments are the one file kind this rewrites (temp file then rename, same path)."""
    name = embedder_name or store.config.embedder["name"]
    opts = options or {k: v for k, v in store.config.embedder.items() if k not in ("name", "model", "dtype", "dim")}
    if name == store.config.embedder["name"] and not options:
        opts.setdefault("dim", store.config.embedder["dim"])
    emb = adapters.get_embedder(name, **opts)
    dtype = store.config.setting("vector_dtype")
    with store.lock():
        refs = []
        for _, path in logfmt.list_days(store.root).items():
            for ln in logfmt.read_lines(path):
                if ln.record is not None and isinstance(ln.record.get("seg"), dict):
                    refs.append(ln.record)
        from .adapters.cache import embed_cached

        touched = set()
        for i in range(0, len(refs), batch):
            part = refs[i : i + batch]
            vecs = embed_cached(emb, [r["text"][:EMBED_CHARS] for r in part], kind="passage")  # as Store.write
            for rec, vec in zip(part, vecs):
                seg = rec["seg"]
                vpath = store.root / seg["shard"] / segment_name(int(seg["vec"]))
                old, _ = read_segment(vpath)
                vtype, body, scale = encode_vector(vec, dtype)
                dim = len(body) // (4 if vtype == 1 else 1)
                header = Header(old.next_id, old.prev_id, len(body), vtype, dim, scale, old.unix_time)
                tmp = vpath.with_name(f".{vpath.name}.tmp-{os.getpid()}")
                tmp.write_bytes(header.pack() + body)
                os.replace(tmp, vpath)
                touched.add(seg["shard"])
        store.config.embedder = {"name": emb.name, "model": emb.model, "dim": emb.dim, "dtype": dtype,
                                 **{k: v for k, v in opts.items() if k not in ("dim",)}}
        store.config.write(store.root)
        store._embedder = emb
        commit = store.git.commit(f"Re-embed {len(refs)} records with {emb.model} ({emb.dim}-d)",
                                  [configfmt.FILENAME, *sorted(touched)])
    return {"records": len(refs), "model": emb.model, "dim": emb.dim, "commit": commit}
