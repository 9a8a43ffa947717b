"""The `openai_server` fixture: a loopback OpenAI-compatible server, with OPENAI_* pointing at it.

Register it for every test file with `pytest_plugins = ["tests.conftest_openai"]` in tests/conftest.py,
or import the fixture into one test module.
"""

from __future__ import annotations

import pytest

try:  # imported as tests.conftest_openai (pytest_plugins)
    from .loopback_openai import LoopbackOpenAI
except ImportError:  # imported as a top-level module (pytest puts tests/ on sys.path)
    from loopback_openai import LoopbackOpenAI


@pytest.fixture
def openai_server(monkeypatch):
    """A running LoopbackOpenAI; set `openai_server.replies` to script the chat replies.

    OPENAI_BASE_URL and OPENAI_API_KEY point at it for the test, so code that reads the
    environment (the CLI, adapters) talks to it without further setup.
    """
    with LoopbackOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        yield server
