"""Sealing pack contents (store format 3): each record's vector, and an original file kept for it,
is encrypted under a key that only the record's day-log line holds (`vkey`), derived from the
record's id and its full text (not from its published sha256): two clones that write or upgrade the
same record write the same line, so a merge keeps one line, not two that differ in their key.

Forgetting a record removes its line, and with it the key, so the sealed bytes in a pack that is
never rewritten can no longer be opened by anything in the files. Every pack also carries a random
nonce, so no two packs share ciphertext, tags or any run of bytes git's rename detection could pair.

Primitives (from `cryptography` and the standard library; nothing hand-made):
- ChaCha20-Poly1305 (AEAD) seals each item, under a subkey of the record's key for its kind;
- keyed BLAKE2b derives those subkeys and the entry tags: tag = BLAKE2b-128(key, nonce), so a
  manifest entry names no record and only a holder of the line's key finds its entry.
"""

from __future__ import annotations

import base64
import hashlib
import os

KEY_BYTES = 32
NONCE_BYTES = 12  # ChaCha20-Poly1305's nonce; one per pack, and a key seals each kind once per pack
AAD = b"memstore pack 3"
VECTOR, BLOB, BLOB_MANIFEST = b"v", b"b", b"m"


def record_key(rid: str, text: str, secret: bytes | None = None) -> str:
    """A record's key as the day log stores it: 32 bytes, base64url without padding.

    BLAKE2b-256 of the id and the whole text, personalised for memstore: without the text (gone with
    a forgotten line) it cannot be made again; the tombstone's sha256 of the text does not give it.
    Who can guess the text can make the key, as they can confirm the guess by the tombstone's hash.
    `secret` (an encrypted store's key epoch: format/sealed_lines.py) keys the hash, so there only a
    holder of the epoch key can make it, guess or not."""
    data = str(rid).encode("utf-8") + b"\0" + str(text).encode("utf-8", "surrogatepass")
    if secret is not None:
        raw = hashlib.blake2b(
            data, key=secret[:64], digest_size=KEY_BYTES, person=b"memstore3-vkeyE"
        ).digest()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    raw = hashlib.blake2b(data, digest_size=KEY_BYTES, person=b"memstore3-vkey").digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def key_bytes(text) -> bytes | None:
    """The 32 key bytes of a line's `vkey`, or None when it is missing or malformed."""
    if not isinstance(text, str) or len(text) != 43:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=")
    except (ValueError, TypeError):
        return None
    return raw if len(raw) == KEY_BYTES else None


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def _subkey(key: bytes, kind: bytes) -> bytes:
    return hashlib.blake2b(kind, key=key, digest_size=32, person=b"memstore3-key").digest()


def tag(key: bytes, nonce: bytes, kind: bytes = VECTOR) -> str:
    """The manifest tag of a record's item of `kind` in the pack with `nonce` (32 hex digits)."""
    return hashlib.blake2b(
        nonce, key=key, digest_size=16, person=b"memstore3-tag-" + kind
    ).hexdigest()


def seal(key: bytes, nonce: bytes, kind: bytes, plaintext: bytes) -> bytes:
    return seal_under(_subkey(key, kind), nonce, plaintext)


def seal_under(subkey: bytes, nonce: bytes, plaintext: bytes) -> bytes:
    """`seal` with the item's subkey made already (a vector's: `vector_subkey`)."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    return ChaCha20Poly1305(subkey).encrypt(nonce, plaintext, AAD)


def vector_subkey(key: bytes) -> bytes:
    """The subkey a record's vector is sealed under: it opens that item and nothing else (the
    index keeps it to re-read the vector, memstore/index/exact.py)."""
    return _subkey(key, VECTOR)


def unseal_vector(subkey: bytes, nonce: bytes, sealed: bytes) -> bytes | None:
    """A sealed vector's plaintext opened with its `vector_subkey`, or None (wrong key, damaged)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    try:
        return ChaCha20Poly1305(subkey).decrypt(nonce, sealed, AAD)
    except (InvalidTag, ValueError):
        return None


def unseal(key: bytes, nonce: bytes, kind: bytes, sealed: bytes) -> bytes | None:
    """The plaintext, or None when `key` is not the one it was sealed with (or the bytes are damaged)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    try:
        return ChaCha20Poly1305(_subkey(key, kind)).decrypt(nonce, sealed, AAD)
    except (InvalidTag, ValueError):
        return None
