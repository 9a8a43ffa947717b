"""An OpenAI-compatible chat LLM: configuration, one call with a short timeout, robust reply parsing.

Every method that callers use on the topic path returns None on failure instead of raising or, as
TRACE did, returning the word "Error": the caller then takes its offline path, so a failed call can
never end up stored as a topic name or summary. `ct chat` uses `complete`, which raises LLMError
with the endpoint's own words, because there the user must see why no answer came.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import MemstoreError

DEFAULT_MODEL = "gpt-4o-mini"


class LLMError(MemstoreError):
    """The LLM endpoint failed or is not configured."""

    exit_code = 1


@dataclass
class LLMConfig:
    base_url: str | None
    api_key: str | None
    model: str
    timeout: float = 30.0
    topics: bool = False  # name/summarise/classify topics on the write path (opt-in)

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)


def load_config(root: Path | None = None) -> LLMConfig:
    """The user's LLM settings (memstore/userconfig.py): the environment, a `.env` in the current
    folder outside any store, then ~/.config/memstore/config.toml. Never the store's files: they
    arrive with `git pull`, and would choose where conversations and keys are sent. `root` is
    accepted for callers that name the store; it is not read."""
    from ..userconfig import llm_settings

    own = llm_settings()
    try:
        timeout = float(own["timeout"] or 30.0)
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        from ..errors import UsageError

        raise UsageError(
            f"MEMSTORE_LLM_TIMEOUT must be a number of seconds above 0, not {own['timeout']!r}."
        )
    return LLMConfig(
        base_url=own["base_url"],
        api_key=own["api_key"],
        model=own["model"] or DEFAULT_MODEL,
        timeout=timeout,
        topics=own["topics"],
    )


class LLM:
    """One configured endpoint. `calls` and `failures` count what happened (reported by reorganize)."""

    def __init__(self, config: LLMConfig):
        self.config = config
        self.calls = 0
        self.failures = 0
        self.last_error: str | None = None
        self._client = None

    @property
    def model(self) -> str:
        return self.config.model

    def client(self):
        if self._client is None:
            import openai  # heavy; imported only when an LLM is actually used

            self._client = openai.OpenAI(
                base_url=self.config.base_url,
                api_key=self.config.api_key or "none",
                timeout=self.config.timeout,
                max_retries=1,
            )
        return self._client

    def complete(
        self, messages: list[dict], temperature: float = 0.3, max_tokens: int | None = None
    ) -> str:
        """The reply text; LLMError (with the endpoint's words) on any failure or an empty reply."""
        self.calls += 1
        try:
            kwargs = {"model": self.config.model, "messages": messages, "temperature": temperature}
            if max_tokens:
                kwargs["max_tokens"] = max_tokens
            resp = self.client().chat.completions.create(**kwargs)
            text = resp.choices[0].message.content if resp.choices else None
        except Exception as exc:  # the openai package raises many types; all mean "no answer"
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise LLMError(
                f"the LLM at {self.config.base_url or 'api.openai.com'} failed: {self.last_error}",
                "Check OPENAI_BASE_URL / OPENAI_API_KEY (or [llm] in ~/.config/memstore/config.toml).",
            ) from None
        if not isinstance(text, str) or not text.strip():
            self.failures += 1
            self.last_error = "empty reply"
            raise LLMError(
                f"the LLM at {self.config.base_url or 'api.openai.com'} returned an empty reply"
            )
        return text

    def chat(
        self, messages: list[dict], temperature: float = 0.3, max_tokens: int | None = None
    ) -> str | None:
        """The reply text, or None on any failure."""
        try:
            return self.complete(messages, temperature, max_tokens)
        except LLMError:
            return None

    def json(
        self, messages: list[dict], temperature: float = 0.1, max_tokens: int | None = 300
    ) -> dict | None:
        """The reply parsed as a JSON object, or None when the call fails or nothing parses."""
        reply = self.chat(messages, temperature, max_tokens)
        if reply is None:
            return None
        data = extract_json(reply)
        if not isinstance(data, dict) or not data:
            self.failures += 1
            self.last_error = "reply was not a JSON object"
            return None
        return data


def get_llm(root: Path | None = None, require: bool = False) -> LLM | None:
    """The configured LLM, or None (LLMError when `require` and nothing is configured)."""
    cfg = load_config(root)
    if not cfg.configured:
        if require:
            raise LLMError(
                "no LLM endpoint is configured.",
                "Set OPENAI_BASE_URL (and OPENAI_API_KEY), or add base_url and model under [llm] in "
                "~/.config/memstore/config.toml (a store's own files never choose an endpoint).",
            )
        return None
    return LLM(cfg)


# ----- reply parsing ----------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = text.find(open_), text.rfind(close)
        if i != -1 and j > i:
            out.append(text[i : j + 1])
    out.append(text)
    return out


def _repair(s: str) -> str:
    s = re.sub(r":\s*N/?A\b", ": null", s)
    s = re.sub(r",\s*([}\]])", r"\1", s)
    return s


def extract_json(text: str):
    """The first JSON value found in an LLM reply: fenced, bare object/array, or Python-literal style."""
    if not isinstance(text, str):
        return None
    for cand in _candidates(text.strip()):
        cand = cand.strip()
        if not cand:
            continue
        for attempt in (cand, _repair(cand)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                pass
            try:
                value = ast.literal_eval(
                    re.sub(
                        r"\btrue\b",
                        "True",
                        re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", attempt)),
                    )
                )
                if isinstance(value, (dict, list)):
                    return value
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                pass
    return None


def as_bool(value, default: bool | None = None) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "0"}:
        return False
    return default
