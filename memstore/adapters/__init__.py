"""Adapters inward: the Embedder (hashing, MiniLM on onnxruntime or numpy, OpenAI-compatible), the
LLM client and the embedding cache, each behind one small interface, registered in one place. The
store's embedder is named in memstore.toml (docs/format.md, "memstore.toml"); endpoints and keys
are the user's own ("Settings that are yours, not the store's").

Heavy libraries (numpy model code, openai) are imported inside the adapter modules, never here, so
that `ct --help` stays instant.
"""

from __future__ import annotations

import importlib

# name -> "module:factory". Built-in adapters register exactly like a plugin would.
EMBEDDERS: dict[str, str] = {
    "minilm": "memstore.adapters.minilm:MiniLMEmbedder",
    "hash": "memstore.adapters.hashing:HashEmbedder",
    "openai": "memstore.adapters.openai_embed:OpenAIEmbedder",
}


class Embedder:
    """What every embedder provides.

    `name` is the registry name, `model` the model id recorded in memstore.toml, `dim` the vector
    length. `embed_batch` returns one L2-normalised float32 row per text (a numpy array of shape
    (len(texts), dim)); `kind` is "passage" for stored text and "query" for search queries.
    `count_tokens` measures text in the embedder's own tokens (chunk sizes are set in these units).
    `in_process` says that `embed_batch` is a pure function computed by this process's own Python
    (no model threads, no server, no cache): a big write may then embed half its records in a
    forked child (memstore/workers.py).
    """

    name: str = ""
    model: str = ""
    dim: int = 0
    max_tokens: int = 256
    in_process: bool = False

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        return max(1, len(text.split()))

    def embed_query(self, text: str):
        return self.embed_batch([text], kind="query")[0]


def get_embedder(name: str, **options) -> Embedder:
    """Instantiate the embedder registered as `name` (the store gives model and dim; endpoints, keys
    and paths come from the user, memstore/userconfig.py, or the calling program)."""
    try:
        target = EMBEDDERS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDERS))
        raise ValueError(f"unknown embedder {name!r} (known: {known})") from None
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory(**options)


def check(name: str, options: dict) -> None:
    """UsageError (nothing changed) for an embedder name that is not registered or a vector size
    below 1, before a store is made or re-embedded with them."""
    from ..errors import UsageError

    if name not in EMBEDDERS:
        raise UsageError(
            f"unknown embedder {name!r}: known are {', '.join(sorted(EMBEDDERS))}.",
            "Nothing was changed.",
        )
    dim = options.get("dim")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
        raise UsageError(
            f"--dim must be a whole number of 1 or more, not {dim!r}.", "Nothing was changed."
        )


def describe(name: str, **options) -> dict:
    """name/model/dim for memstore.toml without loading model weights where possible."""
    module_name, _, attr = EMBEDDERS[name].partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    if hasattr(factory, "describe"):
        return factory.describe(**options)
    emb = factory(**options)
    return {"name": emb.name, "model": emb.model, "dim": emb.dim}
