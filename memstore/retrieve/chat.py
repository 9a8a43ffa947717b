"""Retrieval-augmented chat: context from memory, an answer from an OpenAI-compatible LLM, both turns stored.

Every turn is written verbatim through `store.write` (one commit per exchange) and so is placed in
the topic tree like any other conversation. The session's own earlier turns go to the model as
chat messages, so the memory context leaves out "recent turns" (TRACE's hosts had to strip that
block with a regex because the model saw the history twice). A failed call stores the user's turn
only: an error message is never stored as an assistant's words.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..adapters.llm import LLM, LLMError, get_llm
from ..format.timeutil import now_utc, to_iso
from ..text import storable
from .context import Context, build_context

SYSTEM = """Today is {today}.
You are a helpful assistant with a long-term memory. The memory context below holds verbatim lines
from earlier conversations and documents, with their dates; where two lines disagree, the later one
is the newer fact. Use it silently as background: do not mention topics, trees or memory systems,
and do not invent memories that are not there. Answer the user's latest message directly.

Memory context:
{context}"""


@dataclass
class ChatTurn:
    user: str
    reply: str | None
    context: Context
    messages: list[dict]
    commit: str | None = None
    ids: list[str] = field(default_factory=list)
    error: str | None = None
    debug_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "user": self.user,
            "reply": self.reply,
            "commit": self.commit,
            "ids": self.ids,
            "error": self.error,
            "context_tokens": self.context.tokens,
            "debug_files": self.debug_files,
            "notes": self.notes,
        }


class ChatSession:
    def __init__(
        self,
        store,
        llm: LLM | None = None,
        session: str | None = None,
        budget: int = 1500,
        verbose: bool = False,
        history_turns: int = 6,
        secrets: str | None = "refuse",
        send_secrets: bool = False,
    ):
        self.store = store
        self.llm = llm or get_llm(store.root, require=True)
        stamp = datetime.now(store.tz).strftime("%Y%m%d-%H%M%S")
        self.session = session or f"chat-{stamp}"
        self.budget = budget
        self.verbose = verbose
        self.history: list[dict] = []
        self.history_turns = history_turns
        self.secrets = secrets or "refuse"
        self.send_secrets = send_secrets

    def prompt(self, text: str, ctx: Context) -> list[dict]:
        today = datetime.now(self.store.tz).strftime("%A, %d %B %Y, %H:%M %Z")
        system = SYSTEM.format(today=today, context=ctx.text or "(nothing relevant found)")
        return [
            {"role": "system", "content": system},
            *self.history[-2 * self.history_turns :],
            {"role": "user", "content": text},
        ]

    def outgoing(self, messages: list[dict]) -> tuple[list[dict], list[str]]:
        """What may leave the machine: every message with its secrets masked (records stored with
        --allow-secrets reach the memory context, an allowed question the history), and a note of
        what was masked; as they are with `send_secrets` (the user's choice for this session)."""
        if self.send_secrets:
            return messages, []
        from ..secrets.policy import scrub_kinds

        out, kinds = [], []
        for m in messages:
            content, found = scrub_kinds(m["content"])
            out.append({**m, "content": content})
            kinds += found
        if not kinds:
            return out, []
        return out, [
            f"masked {len(kinds)} secret{'s' if len(kinds) != 1 else ''} ({', '.join(sorted(set(kinds)))}) "
            "in what was sent to the LLM; pass --send-secrets to send them as stored"
        ]

    def ask(self, text: str) -> ChatTurn:
        """One exchange: context, LLM answer, both turns stored (just the user's if the LLM failed)."""
        if not text.strip():
            raise LLMError("empty message")
        from ..secrets.policy import apply as secrets_apply

        if (
            self.secrets == "refuse"
        ):  # before the question leaves the machine, not only before the commit
            secrets_apply([{"text": text}], "refuse")
        elif self.secrets == "redact":
            from ..secrets.policy import scrub

            text = scrub(text)
        asked_at = to_iso(now_utc())
        ctx = build_context(self.store, text, budget=self.budget, recent=0)
        messages, notes = self.outgoing(self.prompt(text, ctx))
        turn = ChatTurn(user=text, reply=None, context=ctx, messages=messages, notes=notes)
        try:
            reply = self.llm.complete(messages, temperature=0.7)
            # (the model's words are kept as a stranger's: made storable, not refused)
            turn.reply = storable(reply) if isinstance(reply, str) else reply
        except LLMError as exc:
            turn.error = str(exc)
        records = [
            self.store.normalize(
                {
                    "ts": asked_at,
                    "role": "user",
                    "type": "text",
                    "text": text,
                    "session": self.session,
                }
            )
        ]
        if turn.reply is not None:
            records.append(
                self.store.normalize(
                    {
                        "ts": to_iso(now_utc()),
                        "role": "assistant",
                        "type": "text",
                        "text": turn.reply,
                        "model": self.llm.model,
                        "session": self.session,
                    }
                )
            )
        from ..secrets.policy import preview as _preview

        preview = _preview(text)
        res = self.store.write(
            records,
            f"Chat turn: {preview}"
            if turn.reply is not None
            else f"Chat turn (no answer: the LLM failed): {preview}",
            secrets=self.secrets,
        )
        turn.commit = res.commit
        turn.ids = [r["id"] for r in res.added]
        if turn.reply is not None:
            self.history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": turn.reply},
            ]
        if self.verbose:
            turn.debug_files = self._debug(turn)
        return turn

    def _debug(self, turn: ChatTurn) -> list[str]:
        """hits, context and prompt of this turn as files under .memstore/chat-debug/ (disposable)."""
        folder = self.store.meta_dir / "chat-debug"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(self.store.tz).strftime("%Y%m%d-%H%M%S-%f")
        files = {
            f"{stamp}-hits.json": json.dumps(
                turn.context.to_json()["sections"], ensure_ascii=False, indent=2
            ),
            f"{stamp}-context.txt": turn.context.text + "\n",
            f"{stamp}-prompt.json": json.dumps(
                {
                    "model": self.llm.model,
                    "messages": turn.messages,
                    "reply": turn.reply,
                    "error": turn.error,
                },
                ensure_ascii=False,
                indent=2,
            ),
        }
        out = []
        for name, body in files.items():
            path = folder / name
            tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
            tmp.write_text(body, encoding="utf-8")
            os.replace(tmp, path)
            out.append(str(Path(path)))
        return out
