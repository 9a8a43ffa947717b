"""ContextTape's own ISStore (contexttape from PyPI, in its own virtualenv) reads our writer folders.

Slow: the first run creates `.bench/ctvenv` from PyPI; later runs reuse it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CT_PYTHON = REPO / ".bench" / "ctvenv" / "bin" / "python"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ct_python():
    subprocess.run(["bash", str(REPO / "scripts" / "ct_venv.sh")], check=True)
    return CT_PYTHON


def run_check(*args):
    return subprocess.run([sys.executable, str(REPO / "scripts" / "compat_check.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)


def test_make_compat_passes(ct_python):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "compat.sh")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "compat: ok store-float32" in proc.stdout and "compat: ok store-int8" in proc.stdout


def _stores(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import compat_check
    finally:
        sys.path.pop(0)
    return compat_check.build_stores(tmp_path)


def _patch_segment(store, name: str, start: int, new: bytes) -> None:
    """Overwrite bytes [start, start+len(new)) of the first `name` segment in the store."""
    seg = sorted(store.glob(f"segments/*/*/*/{name}"))[0]
    raw = bytearray(seg.read_bytes())
    raw[start : start + len(new)] = new
    seg.write_bytes(bytes(raw))


def test_changed_text_byte_is_reported_with_its_file(ct_python, tmp_path):
    f32, _ = _stores(tmp_path)
    seg = sorted(f32.glob("segments/*/*/*/segment_0.is"))[0]
    _patch_segment(f32, "segment_0.is", 33, bytes([seg.read_bytes()[33] ^ 0x20]))  # same length, other case
    proc = run_check("--store", f32, "--ct-python", ct_python)
    assert proc.returncode == 1
    assert "segment_0.is: ContextTape reads text" in proc.stderr


def test_broken_back_link_is_reported_as_a_missing_pair(ct_python, tmp_path):
    _, i8 = _stores(tmp_path)
    _patch_segment(i8, "segment_1.is", 4, (7).to_bytes(4, "little", signed=True))  # prev_id no longer names its text
    proc = run_check("--store", i8, "--ct-python", ct_python)
    assert proc.returncode == 1
    assert "ContextTape does not list pairs [(0, 1)]" in proc.stderr


def test_stored_vector_must_equal_the_embedders(ct_python, tmp_path):
    f32, _ = _stores(tmp_path)
    _patch_segment(f32, "segment_1.is", 32, bytes.fromhex("0000803f"))  # first float 1.0; both readers agree
    assert run_check("--store", f32, "--ct-python", ct_python).returncode == 0
    proc = run_check("--store", f32, "--ct-python", ct_python, "--reembed")
    assert proc.returncode == 1 and "stored vector differs from the embedder's" in proc.stderr
