"""Secrets (ground): the detector (`detect`: findings in text and credential file names; recall and
false positives measured in docs/security.md) and the policy every write path applies to what it
finds (`policy`: refuse, skip, redact or allow; masking for every message and view). A redacted
record keeps its masked text and says so in its meta (docs/format.md, "Records")."""
