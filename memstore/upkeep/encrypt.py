"""`ct encrypt`: turn an existing plaintext store into an encrypted one (docs/security.md), in one
commit that leaves it exactly as `ct init --encrypt` and the same writes would have: every line of
the day logs, tree shards, markers, tombstones and purge file sealed (format/sealed_lines.py), each
record's pack key (`vkey`) remade under the new epoch's secret and its vector (and original file)
sealed again under it in one new pack per day, and `keys/` written. `--rewrite-history` then
rewrites every earlier commit the same way (forget/purge.py's machinery), so no commit reachable
from a branch holds a plain line or a commit message with record words.
"""

from __future__ import annotations

import re

from .. import keyring
from ..errors import FormatError, MemstoreError, UsageError
from ..format import layout
from ..format import log as logfmt
from ..format import pack as packfmt
from ..format import record as recordfmt
from ..format import seal
from ..format import sealed_lines

ENCRYPTED_NOTICE = "History rewritten: no commit of this clone holds a plain line any more."


def line_files(root) -> list[str]:
    """Store-relative paths of every committed file whose lines an encrypted store seals."""
    pattern = re.compile(layout.SEALED_LINE_FILES)
    out = []
    for sub in (layout.LOG, "tree"):
        base = root / sub
        if base.is_dir():
            out += [p.relative_to(root).as_posix() for p in sorted(base.rglob("*.jsonl"))]
    out += [n for n in ("markers.jsonl", "forgotten.jsonl", "purged-history.jsonl")]
    return [p for p in out if pattern.match(p) and (root / p).is_file()]


def _refuse(store, rewrite: bool) -> None:
    from ..gitrepo import refuse_if_unfinished

    if keyring.is_encrypted(store.root) or store.sealer is not None:
        raise UsageError(
            f"{store.root} is already an encrypted store ({keyring.RECIPIENTS} exists).",
            'To seal everything under a new key, run "ct keys rotate --rewrite". Nothing was changed.',
        )
    refuse_if_unfinished(store.root, "encrypt the store")
    dirty = [
        ln[3:]
        for ln in store.git.run("status", "--porcelain", "--untracked-files=all").splitlines()
    ]
    if dirty:
        raise UsageError(
            f"{store.root / dirty[0]} has uncommitted changes"
            + (f" (and {len(dirty) - 1} more files)" if len(dirty) > 1 else "")
            + ": ct encrypt seals only committed files.",
            'Commit them, or roll them back ("ct fsck --repair" for memstore\'s own files). '
            "Nothing was changed.",
        )
    if rewrite:
        from ..forget.purge import refuse_shallow_purge

        refuse_shallow_purge(store)
        old = sorted(
            {
                int(m.group(1))
                for m in re.finditer(
                    r"(?m)^\+format_version\s*=\s*(\d+)",
                    store.git.run("log", "--all", "-p", "--format=", "--", "memstore.toml"),
                )
            }
        )
        if old and old[0] < 3:
            raise UsageError(
                f'{store.root}: its history holds format-{old[0]} commits (from before "ct upgrade"), '
                "whose files --rewrite-history does not know how to seal (format 1 and 2 keep text or "
                "plain vectors outside line files).",
                "Run ct encrypt without --rewrite-history (the history keeps its plain text), or "
                "start a new encrypted store. Nothing was changed.",
            )


def _check_lines(store, rels: list[str]) -> None:
    """Every line must parse before it is sealed: a damaged one is named, nothing is changed."""
    for rel in rels:
        if not rel.startswith(layout.LOG + "/"):
            continue
        for ln in logfmt.read_lines(store.root / rel):
            if ln.error:
                raise MemstoreError(
                    f"{store.root / rel}:{ln.line_no}: {ln.error}",
                    'Run "ct fsck" and repair the file before encrypting. Nothing was changed.',
                )


def _rekey_day(store, day: str, path, secret: bytes, dim: int, private_secret=None) -> bytes:
    """The day log's plain bytes with each record's `vkey` remade under `secret` (a private
    record's under `private_secret`), and the day's packs replaced by one holding every item the
    old keys opened, sealed under the new keys."""
    records, out = [], []
    for raw in logfmt.read_plain(path).split(b"\n"):
        if not raw.strip():
            out.append(raw)
            continue
        rec = recordfmt.loads(raw.decode("utf-8"))
        old = rec.get("vkey")
        mine = private_secret is not None and recordfmt.is_private(rec)
        rec["vkey"] = seal.record_key(rec["id"], rec["text"], private_secret if mine else secret)
        records.append((str(rec["id"]), seal.key_bytes(old), seal.key_bytes(rec["vkey"])))
        out.append(recordfmt.dumps(rec).encode("utf-8"))
    folder = packfmt.day_dir(store.root, day)
    old_packs = packfmt.pack_files(folder)
    if old_packs:
        ring = [(rid, k) for rid, k, _n in records if k is not None]
        new_key = {(rid, k): n for rid, k, n in records if k is not None}
        w, seen = packfmt.PackWriter(day, dim), set()
        for p in old_packs:
            try:
                pk = packfmt.read(p, verify=True)
            except (OSError, packfmt.PackError) as exc:
                raise FormatError(
                    p,
                    str(exc).removeprefix(f"{p}: "),
                    hint='Run "ct fsck" to see what is damaged; its vectors cannot be sealed '
                    "again. Nothing was changed.",
                ) from None
            for it in pk.items(ring):
                nk = new_key.get((it.record_id, it.key))
                if nk is not None and (it.record_id, nk, it.h16) not in seen:
                    seen.add((it.record_id, nk, it.h16))
                    w.add_encoded(it.record_id, nk, it.h16, it.header, it.payload)
            for rid, key, bh, body, mbody in pk.blobs(ring):
                nk = new_key.get((rid, key))
                if nk is not None and (rid, nk, "blob") not in seen:
                    seen.add((rid, nk, "blob"))
                    w.add_blob(rid, nk, body, bh.data_type, mbody, bh.unix_time)
        new = w.write(store.root) if w else None
        for p in old_packs:
            if p != new:
                p.unlink()
    return b"\n".join(out)


def encrypt(store, recipients=(), rewrite_history: bool = False) -> dict:
    """Seal a plaintext store to the user's own recipient and `recipients` (one commit); with
    `rewrite_history`, rewrite every earlier commit too. → {commit, recipients, files, notice}."""
    from ..core import _init_recipients
    from ..transaction import refuse_old_format

    refuse_old_format(store)
    _refuse(store, rewrite_history)
    readers = _init_recipients(list(recipients))
    rels = line_files(store.root)
    _check_lines(store, rels)
    key = keyring.new_key()
    sealer = sealed_lines.Sealer(store.root, {1: key}, 1)
    dim = int(store.config.embedder["dim"])
    days = logfmt.list_days(store.root)
    private = sum(
        1
        for path in days.values()
        for ln in logfmt.read_lines(path)
        if ln.record is not None and recordfmt.is_private(ln.record)
    )
    try:
        with store.transaction("Encrypt the store") as tx:
            if private:
                # records labelled private are sealed to the encrypting user's own private key, as
                # that user's first private add would (format.md "Private lines")
                ident = keyring.identity_path()
                kid, pkey, paths = keyring.wrap_private(
                    store.root, keyring.recipient_of(ident), keyring.owner_secret(ident)
                )
                sealer.add_private(kid, pkey)
                tx.stage(paths)
            psecret = sealer.private_secret() if private else None
            plain = {rel: logfmt.read_plain(store.root / rel) for rel in rels}
            for day, path in sorted(days.items()):
                rel = path.relative_to(store.root).as_posix()
                plain[rel] = _rekey_day(store, day, path, sealer.vkey_secret(), dim, psecret)
                tx.stage(layout.pack_dir(day))
            for rel, data in plain.items():  # written sealed while no Sealer is registered
                logfmt.rewrite(store.root / rel, sealer.seal_payload(store.root / rel, data))
            tx.stage(rels)
            tx.stage(keyring.wrap_epoch(store.root, 1, key, readers))
            keyring.write_recipients(store.root / keyring.RECIPIENTS, readers)
            tx.stage([keyring.RECIPIENTS])
            # from here the store is encrypted: its commit subject too (transaction.sealed_subject)
            sealed_lines.register(store.root, sealer)
            store.sealer = sealer
    except BaseException:
        sealed_lines.register(store.root, None)
        store.sealer = None
        raise
    try:
        store.meta_dir.chmod(0o700)
    except OSError:
        pass
    out = {
        "commit": tx.commit,
        "recipients": readers,
        "files": len(rels),
        "notice": None,
        "private": private,
    }
    if rewrite_history:
        from ..forget.purge import rewrite_sealed

        files = {
            f"{keyring.KEYS_DIR}/{p.name}": p.read_bytes()
            for p in sorted((store.root / keyring.KEYS_DIR).iterdir())
            if p.is_file()
        }
        notice = rewrite_sealed(
            store, {1: key}, 1, (), "The store is encrypted at its last commit", keys_files=files
        )
        out["notice"] = ENCRYPTED_NOTICE + notice[notice.index("\n") :]
        out["commit"] = store.git.run("rev-parse", "HEAD")
    return out
