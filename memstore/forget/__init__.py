"""Forgetting, by job (a feature): `select` (which records), `remove` (their text out of every
committed file in one commit, a tombstone left), `leftovers` (what a plain git merge brought back on
a clone that had not yet seen the forget) and `purge` (out of git history too, and kept out).
Nouns: the tombstone (docs/format.md, "forgotten.jsonl"), the purge record ("purged-history.jsonl"),
and what plain git may bring back ("Merging with plain git")."""
