"""memstore's optional C parts (tree/_words.c, secrets/_quiet.c) are built by `make install`
wherever a C compiler is: a build that failed quietly (they are optional, so a machine without a
compiler still installs) would leave every big write on the slower Python paths unnoticed, and
their own tests skipped."""

from __future__ import annotations

import importlib
import os
import shutil

import pytest


@pytest.mark.parametrize("name", ["memstore.tree._words", "memstore.secrets._quiet"])
def test_the_c_parts_are_built_where_a_compiler_is(name):
    if os.environ.get("CC"):
        pytest.skip("CC names this build's compiler (CC=/bin/false builds without the C parts)")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the Python paths are used")
    module = importlib.import_module(name)
    assert module.__file__.endswith((".so", ".pyd"))
