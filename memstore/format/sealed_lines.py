"""Sealed lines: each committed line of an encrypted store, encrypted on its own (docs/format.md,
"Encrypted stores").

A sealed line is `ms1.<epoch>.<base64url of AES-256-SIV(line)>`: AES-SIV (RFC 5297, from
`cryptography`; nothing hand-made) is a deterministic AEAD — its nonce is a keyed hash of the
plaintext (the synthetic IV) — so the same plaintext line in the same file sealed under the same
epoch key is the same sealed line on every clone, and git's union merge still merges the files as
text. The associated data binds the line to the file it belongs in (its store-relative path, which
names the kind and the day) and to its epoch, so a line moved to another file or relabelled fails.

A private line (a record of scope "private", docs/format.md "Private lines") is
`ms1p.<key id>.<base64url of AES-256-SIV(line)>` under its writer's own private key, which is
wrapped to that writer's recipient alone: other readers' clones skip it silently and count it
(`hidden`), and a rewrite of the file from their view keeps it byte for byte (`with_foreign`).

Readers see the plain view of a file: its bytes with every sealed line opened (`plain_view`), the
offsets of the index pointing into that view. Writers hand plain lines to `seal_payload`. A store
is encrypted while a Sealer is registered for its root (memstore/core.py registers one on open);
a sealed file read with none registered stops with NoKeyError (exit 10), never a silent skip.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from pathlib import Path

from .. import storefile
from ..errors import FormatError, MemstoreError

PREFIX = b"ms1."
PRIVATE_PREFIX = b"ms1p."
KEY_BYTES = 64  # AES-256-SIV takes a 512-bit key
AAD_LABEL = b"memstore sealed line 1"
PRIVATE_LABEL = b"memstore private line 1"


class NoKeyError(MemstoreError):
    """No identity of this user opens (this part of) an encrypted store."""

    exit_code = 10


class TamperedLine(FormatError):
    """A sealed line that its epoch key does not open: changed, moved or damaged (exit 4)."""


def _aad(rel: str, epoch: int) -> list[bytes]:
    return [AAD_LABEL, rel.encode("utf-8", "surrogateescape"), str(epoch).encode("ascii")]


def seal_one(key: bytes, epoch: int, rel: str, line: bytes) -> bytes:
    """One plain line (no newline) sealed for the file `rel` (store-relative, with `/`)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    ct = AESSIV(key).encrypt(line, _aad(rel, epoch))
    return PREFIX + str(epoch).encode("ascii") + b"." + base64.urlsafe_b64encode(ct).rstrip(b"=")


def parse(sealed: bytes) -> tuple[int, bytes] | None:
    """(epoch, ciphertext) of a sealed line, or None when it is not one."""
    if not sealed.startswith(PREFIX):
        return None
    head, dot, body = sealed[len(PREFIX) :].partition(b".")
    if not dot or not head.isdigit() or len(head) > 6:
        return None
    try:
        ct = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    return int(head), ct


def _private_aad(rel: str, kid: str) -> list[bytes]:
    return [PRIVATE_LABEL, rel.encode("utf-8", "surrogateescape"), kid.encode("ascii")]


def seal_private(key: bytes, kid: str, rel: str, line: bytes) -> bytes:
    """One plain line sealed under a writer's private key `kid` for the file `rel`."""
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    ct = AESSIV(key).encrypt(line, _private_aad(rel, kid))
    return PRIVATE_PREFIX + kid.encode("ascii") + b"." + base64.urlsafe_b64encode(ct).rstrip(b"=")


def parse_private(sealed: bytes) -> tuple[str, bytes] | None:
    """(key id, ciphertext) of a private line, or None when it is not one."""
    if not sealed.startswith(PRIVATE_PREFIX):
        return None
    head, dot, body = sealed[len(PRIVATE_PREFIX) :].partition(b".")
    if not dot or len(head) != 16 or not all(c in b"0123456789abcdef" for c in head):
        return None
    try:
        ct = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    return head.decode("ascii"), ct


def _cut_short(raw: bytes) -> bool:
    """Whether `raw` can be a sealed line a killed write cut short (what an append leaves)."""
    return raw.startswith((PREFIX, PRIVATE_PREFIX)) or PRIVATE_PREFIX.startswith(raw)


def is_sealed_line(raw: bytes) -> bool:
    """Whether `raw` has the form of a sealed line, shared or private (no key needed)."""
    return parse(raw) is not None or parse_private(raw) is not None


def is_private_line(line: bytes) -> bool:
    """Whether a plain day-log line is a record of scope "private" (its top-level `scope`), however
    it is spelt (memstore writes it compact; a line from elsewhere may not be)."""
    if b"private" not in line and b"\\u" not in line:  # (a JSON escape can spell it too)
        return False
    from . import safejson

    try:
        obj = safejson.loads(line)
    except ValueError:  # also nested too deep, a giant number, NaN
        return False
    return isinstance(obj, dict) and obj.get("scope") == "private"


def open_private(key: bytes, kid: str, rel: str, ct: bytes) -> bytes | None:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    try:
        return AESSIV(key).decrypt(ct, _private_aad(rel, kid))
    except (InvalidTag, ValueError):
        return None


def open_one(key: bytes, epoch: int, rel: str, ct: bytes) -> bytes | None:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    try:
        return AESSIV(key).decrypt(ct, _aad(rel, epoch))
    except (InvalidTag, ValueError):
        return None


class Sealer:
    """The epoch keys this user's identity opened for one store, and the newest epoch (writes)."""

    def __init__(
        self,
        root: Path,
        keys: dict[int, bytes],
        newest: int,
        identity_note: str = "",
        private: dict[str, bytes] | None = None,
        identity=None,
    ):
        self.root = Path(root)
        self.keys = dict(keys)
        self.newest = newest
        self.identity_note = identity_note  # which identity file, for messages
        self.identity = identity  # the identity file (a private key is wrapped to its recipient)
        self.private = dict(private or {})  # private key id -> key: those this identity opens
        self.own: set[str] = set(private or {})  # those its owner made (memstore/keytrust.py)
        self.doubtful: dict[int, str] = {}  # epochs that open but are not trusted: why
        self.doubtful_keys: dict[int, bytes] = {}
        self.lost: int | None = None  # the clone's newest trusted epoch, when its file is gone
        self.trust = None  # the clone's keytrust.Record, to keep
        self.vouches: dict[int, list[str]] = {}  # epoch -> its key file's `after:` lines
        self.readers: dict[int, list[str] | None] = {}  # epoch -> its key file's `reader:` lines
        self.doubtful_private: dict[str, bytes] = {}  # private keys that open, no valid `auth`
        self.unopened: dict[str, int] = {}  # file -> lines of epochs this identity does not open
        self.hidden: dict[str, int] = {}  # file -> private lines of other writers (skipped)
        self.foreign: dict[str, list[bytes]] = {}  # file -> those lines as sealed, for rewrites

    def private_kid(self) -> str | None:
        """The private key this identity seals its private lines under: the first by id of those
        its owner made (one planted by someone else, wrapped to this identity, is never used)."""
        own = [kid for kid in self.own if kid in self.private]
        return min(own) if own else None

    def add_private(self, kid: str, key: bytes) -> None:
        """A private key this identity just made."""
        self.private[kid] = key
        self.own.add(kid)

    def private_secret(self) -> bytes:
        """What keys the pack keys of this writer's private records (never the team's epoch key,
        so a team member cannot confirm a guessed private text against a pack either)."""
        import hashlib

        kid = self.private_kid()
        if kid is None:
            raise NoKeyError(f"{self.root}: no private key of yours to seal a private record.")
        return hashlib.blake2b(
            b"vkey", key=self.private[kid], digest_size=64, person=b"memstore-pvkeys1"
        ).digest()

    def hides(self, path) -> bool:
        """Whether the file (read last by this process) held lines this identity cannot open."""
        rel = self.rel(path)
        return bool(self.hidden.get(rel) or self.unopened.get(rel))

    def others_private(self) -> int:
        """How many private lines of other writers the day logs hold (a scan of line headers: no
        key is tried), for `ct stat` and `ct fsck`."""
        n = 0
        base = self.root / "log"
        for f in sorted(base.rglob("*.jsonl")) if base.is_dir() else []:
            try:
                data = storefile.read_bytes(f)
            except storefile.StoreLink:
                continue  # damage: fsck names it
            for raw in data.split(b"\n"):
                if raw.startswith(PRIVATE_PREFIX):
                    parsed = parse_private(raw)
                    n += parsed is not None and parsed[0] not in self.private
        return n

    def with_foreign(self, path, sealed: bytes | None) -> bytes | None:
        """`sealed` (a file's new sealed bytes, or None to remove it) with the other writers'
        private lines the file held appended byte for byte: a rewrite never loses them."""
        keep = self.foreign.get(self.rel(path)) or []
        if not keep:
            return sealed
        have = set((sealed or b"").split(b"\n"))
        extra = b"".join(line + b"\n" for line in keep if line not in have)
        return (sealed or b"") + extra

    def rel(self, path) -> str:
        try:  # a link inside the store is not followed out of it (memstore/storefile.py)
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return Path(path).resolve().relative_to(self.root).as_posix()

    def write_key(self) -> bytes:
        self.refuse_doubt()
        key = self.keys.get(self.newest)
        if key is None:
            raise NoKeyError(
                f"{self.root}: your identity{self.identity_note} does not open the store's newest key "
                f"epoch ({self.newest}): you were removed as a recipient, or someone who can push "
                f"added keys/epoch-{self.newest:04d}.age; you cannot write to it. Nothing was written.",
                f'"git -C {self.root} log -- keys/epoch-{self.newest:04d}.age" shows who committed it. '
                'If you were removed, ask a remaining recipient to run "ct keys add YOUR_RECIPIENT".',
            )
        return key

    def refuse_doubt(self) -> None:
        """No write while a key epoch opens that this clone does not trust, or while the newest
        epoch it trusted is gone (memstore/keytrust.py): either could be someone who can push
        choosing the key the next lines are sealed under."""
        if self.lost is not None and self.lost not in self.keys:
            raise NoKeyError(
                f"{self.root}/keys/epoch-{self.lost:04d}.age: gone, and this clone has written "
                f"under key epoch {self.lost}: a commit removed it (anyone who can push can), and "
                "an older epoch may be one a removed reader holds. Nothing was written.",
                f'Find the commit ("git -C {self.root} log --diff-filter=D -- keys") and revert it.',
            )
        if self.doubtful:
            epoch = max(self.doubtful)
            raise NoKeyError(
                f"{self.root}/keys/epoch-{epoch:04d}.age: opens with your identity, but this "
                f"clone does not trust it: {self.doubtful[epoch]}. Sealing under it could let "
                "whoever made it read what you write. Nothing was written.",
                f'See who committed it ("git -C {self.root} log -- keys/epoch-{epoch:04d}.age"); '
                f'if a reader of this store made it, run "ct keys trust {epoch}", else revert '
                "that commit.",
            )

    def vkey_secret(self) -> bytes:
        """What keys the records' pack keys (format/seal.py `record_key`) in the newest epoch."""
        import hashlib

        return hashlib.blake2b(
            b"vkey", key=self.write_key(), digest_size=64, person=b"memstore-vkeys1"
        ).digest()

    def refuse_partial(self, path) -> None:
        """A whole-file rewrite from a view that left lines out would lose them: refuse it."""
        self.write_key()
        with storefile.open_file(path) if os.path.exists(path) else _empty() as f:
            self.open_data(path, f.read())
        if self.unopened.get(self.rel(path)):
            raise NoKeyError(
                f"{path}: holds lines sealed under key epochs your identity does not open; "
                "rewriting it would lose them. Nothing was changed."
            )

    def seal_payload(self, path, payload: bytes) -> bytes:
        """Whole plain lines (each ending in a newline) sealed one by one, for `path`."""
        key, rel = self.write_key(), self.rel(path)
        logs = rel.startswith("log/")
        out = []
        for line in payload.split(b"\n"):
            if not line:
                out.append(line)
            elif logs and is_private_line(line):
                kid = self.private_kid()
                if kid is None:
                    raise NoKeyError(
                        f"{path}: a private record, and you have no private key in this store.",
                        "Nothing was written.",
                    )
                out.append(seal_private(self.private[kid], kid, rel, line))
            else:
                out.append(seal_one(key, self.newest, rel, line))
        return b"\n".join(out)

    def open_data(self, path, data: bytes) -> bytes:
        """The plain view of a file's bytes: every sealed line opened; a tampered line stops with
        TamperedLine naming the file and line; lines of epochs this identity does not open are
        left out and counted in `unopened` (a removed recipient's view of newer records)."""
        rel = self.rel(path)
        logs = rel.startswith("log/")
        lines = data.split(b"\n")
        out, skipped, foreign = [], 0, []
        for n, raw in enumerate(lines, 1):
            if not raw:
                out.append(raw)
                continue
            if raw.startswith(PRIVATE_PREFIX):
                plain = self._open_private(path, rel, raw, n, last=n == len(lines))
                if plain is None:
                    foreign.append(raw)
                else:
                    out.append(plain)
                continue
            parsed = parse(raw)
            if n == len(lines):  # no newline after it: an unfinished last write
                key = self.keys.get(parsed[0]) if parsed else None
                plain = open_one(key, parsed[0], rel, parsed[1]) if key else None
                if plain is None and not _cut_short(raw):
                    raise TamperedLine(
                        path,
                        "not a sealed line, in an encrypted store (a last line without its "
                        "newline that no write of memstore left: readers of purges and "
                        "tombstones would have taken it as plain JSON)",
                        n,
                        f"Nothing was read or changed. Compare it with git's copy (\"git -C "
                        f'{self.root} log -p -- {rel}").',
                    )
                out.append(plain if plain is not None else raw)  # the reader names it
                continue
            if parsed is None:
                raise TamperedLine(
                    path,
                    "not a sealed line, in an encrypted store (every committed line must be sealed; "
                    "a plain line here was not written by memstore)",
                    n,
                    "Nothing was read or changed. Restore the file from git "
                    f'("git -C {self.root} checkout -- {rel}") if you did not put it there.',
                )
            epoch, ct = parsed
            key = self.keys.get(epoch)
            if key is None:
                skipped += 1
                continue
            plain = open_one(key, epoch, rel, ct)
            if plain is not None and logs and is_private_line(plain):
                raise TamperedLine(
                    path,
                    "a record labelled private, sealed under the shared key: memstore seals every "
                    "private record under its writer's own key, so another reader made this line",
                    n,
                    f'Nothing was read or changed. See who ("git -C {self.root} log -p -- {rel}").',
                )
            if plain is None:
                raise TamperedLine(
                    path,
                    f"sealed line (epoch {epoch}) fails authentication: it was changed, damaged or "
                    "moved from another file",
                    n,
                    "Nothing was read or changed. Compare it with git's copy "
                    f'("git -C {self.root} log -p -- {rel}").',
                )
            out.append(plain)
        if skipped:
            self.unopened[rel] = skipped
        else:
            self.unopened.pop(rel, None)
        if foreign:
            self.hidden[rel], self.foreign[rel] = len(foreign), foreign
        else:
            self.hidden.pop(rel, None)
            self.foreign.pop(rel, None)
        return b"\n".join(out)

    def _open_private(self, path, rel: str, raw: bytes, n: int, last: bool) -> bytes | None:
        """A private line's plain bytes; None when it is another writer's (not this identity's
        key): skipped, never an error. One of ours that fails is tampering, as for shared lines."""
        parsed = parse_private(raw)
        if parsed is None:
            if last:  # an unfinished last write: the reader names it
                return raw
            raise TamperedLine(
                path, "a damaged private line (its header does not parse)", n,
                f'Nothing was read or changed. Compare it with git\'s copy ("git -C {self.root} '
                f'log -p -- {rel}").',
            )  # fmt: skip
        kid, ct = parsed
        key = self.private.get(kid)
        if key is None:
            return None if not last else raw
        plain = open_private(key, kid, rel, ct)
        if plain is None:
            if last:
                return raw
            raise TamperedLine(
                path,
                "private line fails authentication: it was changed, damaged or moved from another file",
                n,
                f"Nothing was read or changed. Compare it with git's copy (\"git -C {self.root} "
                f'log -p -- {rel}").',
            )
        return plain


_SEALERS: dict[str, Sealer] = {}
_BY_DIR: dict[str, Sealer | None] = {}  # a folder -> the Sealer of the store holding it (cache)
_VIEWS: dict[str, tuple[tuple, bytes]] = {}
_LOCK = threading.Lock()
_VIEW_CACHE = 64


def register(root, sealer: Sealer | None) -> None:
    key = str(Path(root).resolve())
    with _LOCK:
        if sealer is None:
            _SEALERS.pop(key, None)
        else:
            _SEALERS[key] = sealer
        _BY_DIR.clear()
        for p in [p for p in _VIEWS if p.startswith(key + os.sep)]:
            del _VIEWS[p]


def sealer_for(path) -> Sealer | None:
    """The Sealer of the registered store that holds `path`, or None."""
    if not _SEALERS:
        return None
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    try:
        return _BY_DIR[folder]
    except KeyError:
        pass
    found = None
    for start in (folder, os.path.realpath(folder)):
        d = start
        for _ in range(4):
            found = _SEALERS.get(d)
            if found is not None or os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
        if found is not None:
            break
    with _LOCK:
        _BY_DIR[folder] = found
    return found


def _no_key(path) -> NoKeyError:
    return NoKeyError(
        f"{path}: this file holds sealed lines of an encrypted store, and no identity opened the store.",
        "Give one with --identity FILE or MEMSTORE_IDENTITY (docs/security.md). Nothing was changed.",
    )


def open_bytes(path, data: bytes) -> bytes:
    """`data` (a file's raw bytes) as its plain view."""
    s = sealer_for(path)
    if s is None:
        if data.startswith((PREFIX, PRIVATE_PREFIX)):
            raise _no_key(path)
        return data
    return s.open_data(path, data)


def plain_view(path, sealer: Sealer | None = None) -> bytes:
    """A file's plain view, read from disk (cached by its size, mtime and inode)."""
    s = sealer or sealer_for(path)
    if s is None:
        data = storefile.read_bytes(path)
        if data.startswith((PREFIX, PRIVATE_PREFIX)):
            raise _no_key(path)
        return data
    st = os.stat(path)
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino, id(s), len(s.keys), len(s.private))
    key = os.path.abspath(os.fspath(path))
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    data = storefile.read_bytes(path)
    view = s.open_data(path, data)
    with _LOCK:
        if len(_VIEWS) >= _VIEW_CACHE:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = (stamp, view)
    return view


def plain_into_sealed(path):
    """The refusal of a plain line appended to a file of sealed lines: the store's keys/ is gone
    (a commit removed it), and memstore never writes an encrypted store's memory in the clear."""
    from ..errors import FormatError

    return FormatError(
        path,
        "holds sealed lines of an encrypted store, but the store has no keys/recipients (a commit "
        "removed keys/): memstore never writes a plain line into an encrypted store's file",
        hint="Find the commit (git log --diff-filter=D -- keys) and revert it. Nothing was changed.",
    )


def _empty():
    import io

    return io.BytesIO(b"")
