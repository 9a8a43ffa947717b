"""reembed: re-embed every record with the store's (or a new) embedder — new packs per day, one commit."""

from __future__ import annotations

from .. import adapters
from ..format import config as configfmt
from ..userconfig import embedder_options
from ..format import log as logfmt
from ..format import pack as packfmt
from ..format.timeutil import from_iso
from ..core import EMBED_CHARS


def reembed_days(store, days: list[str], why: str, batch: int = 256) -> dict:
    """Re-embed only `days` with the store's own embedder (one commit; memstore.toml unchanged):
    the days a merge brought packs of another vector size into."""
    count = {"n": 0}
    with store.transaction(
        lambda: f"Re-embed {count['n']} records of {len(days)} days: {why}"
    ) as tx:
        emb, dtype = store.embedder, store.config.setting("vector_dtype")
        for day in days:
            count["n"] += _reembed_day(store, day, emb, dtype, batch)
            tx.stage(store.rel(packfmt.day_dir(store.root, day)))
    return {"records": count["n"], "days": list(days), "commit": tx.commit}


def mismatched_days(store, packs=None) -> list[str]:
    """Days with a pack whose vectors are not of the store's size (a merge with a clone that
    re-embedded while this one wrote); only `packs` (paths) are looked at when given."""
    dim = int(store.config.embedder["dim"])
    if packs is None:
        packs = [
            p
            for folder in packfmt.all_pack_days(store.root).values()
            for p in packfmt.pack_files(folder)
        ]
    days = set()
    for p in packs:
        try:
            manifest = packfmt.read_manifest(p)
        except (OSError, packfmt.PackError):
            continue  # a damaged or deleted pack is fsck's to name
        if manifest.get("dim") != dim and (manifest.get("records") or []):
            days.add(str(manifest.get("day") or p.parent.name))
    return sorted(days)


def reembed(
    store, embedder_name: str | None = None, options: dict | None = None, batch: int = 256
) -> dict:
    """Every day gets one new pack with the new vectors (blobs carried over byte for byte); old packs go."""
    name = embedder_name or store.config.embedder["name"]
    opts = dict(options or {})
    if name == store.config.embedder["name"] and not options:
        opts.setdefault("dim", store.config.embedder["dim"])
        opts.setdefault("model", store.config.embedder["model"])
    adapters.check(name, opts)
    emb = adapters.get_embedder(name, **{**embedder_options(), **opts})
    dtype = store.config.setting("vector_dtype")
    count = {"n": 0}
    with store.transaction(
        lambda: f"Re-embed {count['n']} records with {emb.model} ({emb.dim}-d)"
    ) as tx:
        days = sorted(set(logfmt.list_days(store.root)) | set(packfmt.all_pack_days(store.root)))
        for day in days:
            count["n"] += _reembed_day(store, day, emb, dtype, batch)
            tx.stage(store.rel(packfmt.day_dir(store.root, day)))
        store.config.embedder = {
            "name": emb.name,
            "model": emb.model,
            "dim": emb.dim,
            "dtype": dtype,
        }  # only what says how the vectors were made (configfmt.EMBEDDER_KEYS), never an endpoint or path
        store.config.write(store.root)
        store._embedder = emb
        tx.stage(configfmt.FILENAME)
    return {"records": count["n"], "model": emb.model, "dim": emb.dim, "commit": tx.commit}


def _reembed_day(store, day: str, emb, dtype: str, batch: int) -> int:
    """Write the day's one new pack; returns how many records it holds vectors for."""
    from ..format import record as recordfmt
    from ..turn_embedding import record_vectors

    recs: dict[str, dict] = {}
    path = logfmt.day_path(store.root, day)
    if path.exists():
        for ln in logfmt.read_lines(path):
            if ln.record is not None:
                recs.setdefault(str(ln.record["id"]), ln.record)
    if store.sealer is not None and store.sealer.hides(path):
        from ..format.sealed_lines import NoKeyError

        raise NoKeyError(
            f"{path}: holds lines your identity does not open (another writer's private records): "
            "re-embedding the day would lose their vectors.",
            "Nothing was changed. Their writer can share them (ct share) or re-embed.",
        )
    old = packfmt.pack_files(packfmt.day_dir(store.root, day))
    writer = packfmt.PackWriter(day, emb.dim)
    keys = packfmt.ring(recs.values())
    key_of = dict(keys)
    ordered = [
        recs[k] for k in sorted(recs) if k in key_of
    ]  # a line without its key can seal nothing
    for i in range(0, len(ordered), batch):
        part = ordered[i : i + batch]
        vecs = record_vectors(emb, part, [r["text"][:EMBED_CHARS] for r in part])  # as Store.write
        for rec, vec in zip(part, vecs):
            text_hash = rec.get("hash") or recordfmt.text_hash(rec["text"])
            rid = str(rec["id"])
            writer.add_vector(
                rid, key_of[rid], text_hash, vec, dtype, int(from_iso(rec["ts"]).timestamp())
            )
    seen = set()
    for p in old:  # originals of ingest-any are not vectors: carried over as they are
        pk = packfmt.read(p)
        for rid, _key, bh, body, mbody in pk.blobs(keys):
            if rid not in seen and rid in key_of:
                seen.add(rid)
                writer.add_blob(rid, key_of[rid], body, bh.data_type, mbody, bh.unix_time)
    new = writer.write(store.root) if writer else None
    for p in old:
        if p != new:
            p.unlink()
    return len(ordered)
