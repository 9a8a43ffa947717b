"""Which key files of an encrypted store a clone trusts (docs/security.md, "Key files from someone
who can push").

Anyone who can push can add a file to `keys/`, and age hides whom a file is wrapped to: that a key
file opens with your identity says nothing about who made it. A pusher who holds no key could
otherwise wrap a key they know to every member's public key and have the next records sealed
under it. So a key is used only when it is vouched for:

- A new epoch's key file carries `after: P <tag>`: HMAC-SHA256 of `epoch E after P` and the new key,
  under a secret derived from epoch P's key (P: the newest epoch when E was made). Only a reader of
  epoch P can make it.
- Each clone keeps the epochs it trusts in its git folder (`memstore-keys.json`, mode 0600, never
  pushed or pulled): each epoch's vouching secret, and the newest epoch it has used. An epoch is
  trusted when this record has it (with the same key), or when its vouch checks under an epoch
  trusted already. A clone with no record yet (a fresh clone) trusts the lowest epoch it opens as
  the root; a clone that opened the store with a memstore from before vouches (the
  `memstore-encrypted` mark and no record) trusts the epochs it opens now, once.
- An epoch that opens but is not trusted is used for nothing: its lines are left out of reads and
  no command writes while one is there (`ct keys trust E` accepts it after a look at who committed
  it). A record's newest epoch whose file is gone (a remote that rolled `keys/` back) stops writes
  too: the epoch before it may be one a removed reader holds.
- A writer's private key file carries `auth: <tag>` under a secret derived from the writer's own
  identity: only its owner can make one, so a private key planted by someone else (wrapped to the
  owner's public key) is never sealed to. One without (made before vouches) is still opened.

HMAC and BLAKE2b are Python's own (hashlib, hmac); nothing hand-made.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import FormatError

RECORD = "memstore-keys.json"  # in the clone's git folder
MARK = "memstore-encrypted"  # in the clone's git folder: this clone opened the store encrypted
_MAX_RECORD = 1 << 20


def epoch_secret(key: bytes) -> bytes:
    """What vouches for the epoch after this one (a one-way function of the epoch's key)."""
    return hashlib.blake2b(key, digest_size=32, person=b"memstore-epvouch").digest()


def _tag(secret: bytes, epoch: int, after: int, key: bytes) -> str:
    msg = f"memstore epoch {epoch} after {after}\n".encode("ascii") + key
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def vouch_line(after: int, after_key: bytes, epoch: int, key: bytes) -> str:
    """The `after: P TAG` line of a new epoch's key file."""
    return vouch_by_secret(after, epoch_secret(after_key), epoch, key)


def vouch_by_secret(after: int, secret: bytes, epoch: int, key: bytes) -> str:
    """The same, from epoch P's vouching secret (a clone's record keeps those of epochs whose
    files a rewrite deleted)."""
    return f"after: {after} {_tag(secret, epoch, after, key)}"


def parse_vouch(line: str) -> tuple[int, str] | None:
    parts = line.split()
    if len(parts) != 3 or parts[0] != "after:" or not parts[1].isdigit() or len(parts[2]) != 64:
        return None
    return int(parts[1]), parts[2]


def owner_secrets(path: Path, identities: list) -> list[bytes]:
    """One secret per identity in the identity file `path`, known only to whoever holds it: what
    authenticates that identity's private keys. An age X25519 identity's is derived from its
    secret key; an SSH key's from the file's bytes."""
    out = []
    for ident in identities:
        if hasattr(ident, "to_public"):
            material = str(ident).encode("ascii")
        else:
            material = Path(path).read_bytes()
        out.append(hashlib.blake2b(material, digest_size=32, person=b"memstore-pkowner").digest())
    return out


def private_auth(secret: bytes, kid: str, key: bytes) -> str:
    msg = f"memstore private key {kid}\n".encode("ascii") + key
    return "auth: " + hmac.new(secret, msg, hashlib.sha256).hexdigest()


def private_is_owned(secrets: list[bytes], kid: str, key: bytes, extra: list[str]) -> bool:
    """Whether a private key file's `auth:` line was made by one of these identities."""
    lines = [x for x in extra if x.startswith("auth: ")]
    if len(lines) != 1:
        return False
    return any(hmac.compare_digest(private_auth(s, kid, key), lines[0]) for s in secrets)


@dataclass
class Record:
    """A clone's trusted epochs: {epoch: its vouching secret}, and the newest it has used."""

    epochs: dict[int, bytes] = field(default_factory=dict)
    newest: int = 0
    private: set[str] = field(default_factory=set)  # private keys without `auth` read here

    @classmethod
    def load(cls, gdir: Path | None) -> Record | None:
        """The record in `gdir`, None when there is none; FormatError naming it when damaged."""
        if gdir is None:
            return None
        path = Path(gdir) / RECORD
        from . import storefile
        from .format import safejson

        try:
            data = storefile.read_bytes(path, limit=_MAX_RECORD)
        except FileNotFoundError:
            return None
        except (OSError, storefile.StoreLink) as exc:
            raise FormatError(path, f"cannot be read ({exc})") from None
        try:
            obj = safejson.loads(data)
            epochs = {int(e): bytes.fromhex(s) for e, s in obj["epochs"].items()}
            newest = int(obj["newest"])
            private = set(obj.get("private", []))
            assert all(len(s) == 32 and e >= 0 for e, s in epochs.items()) and newest >= 0
            assert all(isinstance(k, str) for k in private)
        except (ValueError, KeyError, TypeError, AttributeError, AssertionError):
            raise FormatError(
                path,
                "is not memstore's record of the key epochs this clone trusts",
                hint="Delete it: the next command trusts the lowest epoch you open and those it "
                "vouches for, and names the rest.",
            ) from None
        return cls(epochs, newest, private)

    def save(self, gdir: Path | None) -> None:
        """Written whole (a temporary file renamed over it), mode 0600; best effort."""
        if gdir is None:
            return
        body = {"epochs": {str(e): s.hex() for e, s in sorted(self.epochs.items())}}
        body["newest"] = self.newest
        body["private"] = sorted(self.private)
        path = Path(gdir) / RECORD
        tmp = path.with_name(f"{RECORD}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(body, f)
            os.replace(tmp, path)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass

    def copy(self) -> Record:
        return Record(dict(self.epochs), self.newest, set(self.private))


@dataclass
class Verdict:
    trusted: dict[int, bytes]  # epoch -> key: used to read and to write
    doubtful: dict[int, str]  # epoch -> why it is not trusted (it opens)
    doubtful_keys: dict[int, bytes]  # their keys, for `ct keys trust`
    record: Record  # what this clone trusts now
    lost: int | None  # the record's newest epoch, when its file is gone


def decide(
    opened: dict[int, tuple[bytes, list[str]]],
    present: list[int],
    record: Record | None,
    migrating: bool = False,
) -> Verdict:
    """Which of the `opened` epochs ({epoch: (key, its `after:` lines)}) to trust, given the
    clone's `record` (None: none yet) and the epoch files `present` (opened or not).

    An epoch not in the record must be vouched for by its predecessor: the highest epoch below it
    that a file or the record has. So a removed reader, who still holds the key of an older epoch,
    cannot vouch for an epoch of its own once the epoch that removed it is here; and two epochs
    never follow the same one."""
    rec = record.copy() if record is not None else Record()
    trusted: dict[int, bytes] = {}
    doubtful: dict[int, str] = {}
    known_epochs = set(present) | set(rec.epochs)
    for epoch in sorted(opened):
        key, after = opened[epoch]
        known = rec.epochs.get(epoch)
        if known is not None:
            if hmac.compare_digest(known, epoch_secret(key)):
                trusted[epoch] = key
            else:
                doubtful[epoch] = "its key changed since this clone trusted it"
            continue
        below = [e for e in known_epochs if e < epoch]
        prev = max(below) if below else None
        why = _check_vouch(epoch, key, after, prev, trusted, rec, doubtful)
        if why is None or migrating or (record is None and not trusted and not doubtful):
            trusted[epoch] = key  # vouched for; or trusted once (migrating); or a fresh root
        else:
            doubtful[epoch] = why
    for epoch, key in trusted.items():
        rec.epochs[epoch] = epoch_secret(key)
    if trusted:
        rec.newest = max(rec.newest, max(trusted))
    lost = rec.newest if rec.newest and rec.newest not in present else None
    keys = {e: opened[e][0] for e in doubtful}
    return Verdict(trusted, doubtful, keys, rec, lost)


def _check_vouch(
    epoch: int,
    key: bytes,
    after: list[str],
    prev: int | None,
    trusted: dict[int, bytes],
    rec: Record,
    doubtful: dict[int, str],
) -> str | None:
    """None when one of the `after` lines vouches for the epoch under its predecessor `prev`, an
    epoch this clone trusts; else why not."""
    if prev is None:
        return "it is not the lowest epoch, yet nothing comes before it"
    if not after:
        return (
            "it carries no vouch from an earlier epoch (made by a memstore before vouches, or by "
            "someone who can push)"
        )
    tags = [v for v in map(parse_vouch, after) if v is not None and v[0] == prev]
    if not tags:
        return (
            f"it is not vouched for by epoch {prev}, the one before it (a vouch by an older epoch "
            "is what a removed reader could make)"
        )
    secret = epoch_secret(trusted[prev]) if prev in trusted else rec.epochs.get(prev)
    if secret is None:
        why = "is in doubt itself" if prev in doubtful else "this clone does not trust or open"
        return f"it is vouched for by epoch {prev}, which {why}"
    if not any(hmac.compare_digest(_tag(secret, epoch, prev, key), tag) for _p, tag in tags):
        return f"its vouch by epoch {prev} is false: it was not made by a reader of epoch {prev}"
    return None
