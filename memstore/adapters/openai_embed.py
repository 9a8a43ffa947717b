"""Embeddings from any OpenAI-compatible endpoint, through the `openai` package."""

from __future__ import annotations

import math

from . import Embedder

DEFAULT_MODEL = "text-embedding-3-small"
BATCH = 128  # texts per request; well under the API's 2048-input and 300k-token limits


def openai_settings(
    base_url: str | None = None, api_key: str | None = None
) -> tuple[str | None, str | None]:
    """(base_url, api_key): arguments first (a program's own choice), then the user's settings
    (memstore/userconfig.py: OPENAI_BASE_URL / OPENAI_API_KEY, a .env outside any store,
    ~/.config/memstore/config.toml). A store's memstore.toml never supplies either."""
    from ..userconfig import openai_endpoint

    own_url, own_key = openai_endpoint()
    return base_url or own_url or None, api_key or own_key or None


def _fail(message: str, hint: str | None = None):
    from ..errors import MemstoreError

    return MemstoreError(message, hint=hint)


class OpenAIEmbedder(Embedder):
    """Vectors from an OpenAI-compatible /v1/embeddings endpoint, L2-normalised here.

    `dim` may be given; otherwise one request discovers it. For text-embedding-3 models a given
    `dim` is also sent as `dimensions`, so the endpoint shortens its vectors to match. Transient
    failures (connection errors, 408/409/429/5xx) are retried by the client; anything else raises
    a MemstoreError, so a failed call can never turn into a stored vector.
    """

    name = "openai"
    max_tokens = 8191  # the input limit of OpenAI's embedding models

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dim: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        retries: int = 2,
        timeout: float = 60.0,
        **_ignored,
    ):
        self.model = model
        self._dim = int(dim) if dim else None
        self._base_url, self._api_key = openai_settings(base_url, api_key)
        self._retries = retries
        self._timeout = timeout
        self._client = None

    @classmethod
    def describe(cls, model: str = DEFAULT_MODEL, dim: int | None = None, **options) -> dict:
        if dim:
            return {"name": cls.name, "model": model, "dim": int(dim)}
        return {"name": cls.name, "model": model, "dim": cls(model=model, **options).dim}

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self._request(["dimension probe"])[0])
        return self._dim

    def embed_batch(self, texts, kind: str = "passage"):
        import numpy as np

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            rows = self._request(texts[start : start + BATCH])
            for i, row in enumerate(rows):
                if len(row) != self._dim:
                    raise _fail(
                        f"{self.model} returned a {len(row)}-d vector where {self._dim} were expected."
                    )
                vec = np.asarray(row, dtype=np.float32)
                norm = float(np.linalg.norm(vec))
                if not math.isfinite(norm) or norm == 0.0:
                    raise _fail(f"{self.model} returned an unusable vector (norm {norm}).")
                out[start + i] = vec / norm
        return out

    def count_tokens(self, text: str) -> int:
        # No tokenizer for remote models here; English averages about 4 characters and 0.75
        # words per token, so take the larger estimate to keep chunks under the limit.
        return max(1, math.ceil(len(text) / 4), math.ceil(len(text.split()) * 4 / 3))

    def _connect(self):
        if self._client is None:
            try:
                import openai
            except ImportError:
                raise _fail(
                    "The openai embedder needs the openai package.", hint="Run: pip install openai"
                ) from None
            api_key = self._api_key
            if api_key is None:
                if self._base_url is None:
                    raise _fail(
                        "No OpenAI API key.",
                        hint="Set OPENAI_API_KEY (or put it in ./.env), or set OPENAI_BASE_URL for a local endpoint.",
                    )
                api_key = (
                    "unused"  # local endpoints often need no key, but the client insists on one
                )
            self._client = openai.OpenAI(
                base_url=self._base_url,
                api_key=api_key,
                max_retries=self._retries,
                timeout=self._timeout,
            )
        return self._client

    def _request(self, texts: list[str]) -> list[list[float]]:
        import openai

        client = self._connect()
        extra = {}
        if self._dim and self.model.startswith("text-embedding-3"):
            extra["dimensions"] = self._dim
        # The API rejects empty strings; a single space embeds "nothing" just as well.
        inputs = [t if t.strip() else " " for t in texts]
        try:
            resp = client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float", **extra
            )
        except openai.OpenAIError as e:
            where = self._base_url or "api.openai.com"
            raise _fail(
                f"Embedding request to {where} failed: {e}",
                hint="Check OPENAI_BASE_URL and OPENAI_API_KEY, or choose another embedder (minilm, hash).",
            ) from e
        data = sorted(resp.data or [], key=lambda d: d.index)
        if [d.index for d in data] != list(range(len(inputs))):
            raise _fail(f"{self.model} returned {len(data)} vectors for {len(inputs)} texts.")
        rows = [d.embedding for d in data]
        if not all(
            isinstance(r, list) and r and all(isinstance(v, (int, float)) for v in r) for r in rows
        ):
            raise _fail(f"{self.model} returned something other than float vectors.")
        return rows
