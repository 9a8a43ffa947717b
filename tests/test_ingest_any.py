"""ct ingest-any: text as chunks, PDFs as text plus original, media and other files as blob + manifest + description."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import wave
import zlib

from conftest import commits, ct, git_clean

from memstore.format import pack as packfmt
from memstore.format.segment import DT_AUDIO, DT_BLOB, DT_IMAGE


# ----- tiny real files, built byte by byte ------------------------------------------------------


def png(w: int, h: int) -> bytes:
    raw = b"".join(b"\x00" + b"\x80\x40\x20" * w for _ in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def jpeg(w: int, h: int, taken: str = "2024:05:03 14:22:10") -> bytes:
    """A JPEG header with an EXIF block (IFD0 → EXIF IFD → DateTimeOriginal) and a baseline frame header."""
    dt = taken.encode() + b"\x00"
    exif_ifd = 8 + 18
    dt_off = exif_ifd + 18
    tiff = b"II*\x00" + struct.pack("<I", 8)
    tiff += (
        struct.pack("<H", 1) + struct.pack("<HHII", 0x8769, 4, 1, exif_ifd) + struct.pack("<I", 0)
    )
    tiff += (
        struct.pack("<H", 1)
        + struct.pack("<HHII", 0x9003, 2, len(dt), dt_off)
        + struct.pack("<I", 0)
        + dt
    )
    app1 = b"Exif\x00\x00" + tiff
    sof = b"\x08" + struct.pack(">HH", h, w) + b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return (
        b"\xff\xd8\xff\xe1"
        + struct.pack(">H", len(app1) + 2)
        + app1
        + b"\xff\xc0"
        + struct.pack(">H", len(sof) + 2)
        + sof
        + b"\xff\xda\x00\x02"
        + b"\x00" * 64
        + b"\xff\xd9"
    )


def wav(seconds: float, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wf:
        wf.setnchannels(1)
        wf.setsampwidth(2)
        wf.setframerate(rate)
        wf.writeframes(b"\x00\x01" * int(seconds * rate))
    return buf.getvalue()


def pdf(text: str) -> bytes:
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        None,
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    stream = f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode()
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(out.tell())
        body = (
            (f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
            if o is None
            else o.encode()
        )
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for o in offsets:
        out.write(f"{o:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def _folder(tmp_path):
    d = tmp_path / "inbox"
    d.mkdir()
    (d / "whiteboard.png").write_bytes(png(64, 48))
    (d / "holiday_photo.jpg").write_bytes(jpeg(4032, 3024))
    (d / "standup-recording.wav").write_bytes(wav(2.5))
    (d / "firmware.bin").write_bytes(bytes(range(256)) * 40)
    (d / "report.pdf").write_bytes(pdf("The quarterly budget is 40k euros"))
    (d / "notes.md").write_text("# Notes\n\nThe whiteboard shows the Q3 roadmap.\n")
    return d


def _records(root):
    out = []
    for p in sorted((root / "log").rglob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text().splitlines()]
    return out


def _blob_pack(root, rec):
    """(pack path, blob segment, manifest segment) of a record's original, looked up by record id."""
    day = rec["ts"][:10]
    keys = packfmt.ring(
        json.loads(x) for x in (root / f"log/{day[:4]}/{day}.jsonl").read_text().splitlines()
    )
    for p in packfmt.pack_files(packfmt.day_dir(root, day)):
        pk = packfmt.read(p)
        for rid, _key, bh, body, mbody in pk.blobs(keys):  # opened with the day log's keys
            if rid == rec["id"] or rec["id"] in json.loads(mbody).get("records", []):
                return p, (bh, body), (None, mbody)
    raise AssertionError(f"no pack holds the blob of {rec['id']}")


def _blob(root, rec):
    _, (bh, body), (mh, manifest) = _blob_pack(root, rec)
    assert rec["source"]["blob"] == {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}
    return bh, body, mh, json.loads(manifest)


# ----- tests -------------------------------------------------------------------------------------


def test_every_kind_of_file_in_one_commit(tmp_path, store):
    d = _folder(tmp_path)
    res = json.loads(ct("-C", store.root, "ingest-any", d, "--json").stdout)
    assert res["added"] == 6 and res["commit"]
    assert commits(store.root)[0] == f"Ingest 6 files (2 chunks, 4 blobs) from {d.name}/"
    assert git_clean(store.root)
    recs = {r["source"]["rel"]: r for r in _records(store.root)}

    img = recs["holiday_photo.jpg"]
    assert img["type"] == "doc" and img["id"].startswith("blob:")
    assert "4032×3024 pixels" in img["text"] and "taken 2024-05-03 14:22:10" in img["text"]
    bh, body, mh, manifest = _blob(store.root, img)
    assert (
        bh.data_type == DT_IMAGE and mh is None
    )  # the manifest opens to JSON (sealed: no header of its own)
    assert body == (d / "holiday_photo.jpg").read_bytes()  # kept whole, byte for byte
    assert (
        manifest["width"] == 4032
        and manifest["height"] == 3024
        and manifest["mime"] == "image/jpeg"
    )
    assert (
        manifest["type"] == "image" and manifest["filename"] == "holiday_photo.jpg"
    )  # ContextTape's keys
    assert manifest["sha256"] == hashlib.sha256(body).hexdigest() == img["source"]["file_sha256"]

    png_rec = recs["whiteboard.png"]
    assert "64×48 pixels" in png_rec["text"] and _blob(store.root, png_rec)[0].data_type == DT_IMAGE

    audio = recs["standup-recording.wav"]
    assert "2.5 seconds" in audio["text"] and "8000 Hz" in audio["text"]
    bh, body, _, manifest = _blob(store.root, audio)
    assert (
        bh.data_type == DT_AUDIO
        and manifest["duration_s"] == 2.5
        and body == (d / "standup-recording.wav").read_bytes()
    )

    other = recs["firmware.bin"]
    bh, body, _, manifest = _blob(store.root, other)
    assert bh.data_type == DT_BLOB and len(body) == 10240 and manifest["kind"] == "binary"
    assert "10240 bytes" in other["text"]

    pdf_rec = recs["report.pdf"]  # text chunks that point at the original
    assert pdf_rec["id"].startswith("doc:") and "quarterly budget is 40k" in pdf_rec["text"]
    bh, body, _, manifest = _blob(store.root, pdf_rec)
    assert (
        bh.data_type == DT_BLOB
        and body == (d / "report.pdf").read_bytes()
        and manifest["mime"] == "application/pdf"
    )

    assert "blob" not in recs["notes.md"]["source"]  # text as in ingest-path
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"] is True

    hits = json.loads(
        ct("-C", store.root, "search", "holiday photo", "--mode", "exact", "--json").stdout
    )["hits"]
    assert hits[0]["id"] == img["id"]
    hits = json.loads(
        ct("-C", store.root, "search", "quarterly budget", "--mode", "exact", "--json").stdout
    )["hits"]
    assert hits[0]["source"]["rel"] == "report.pdf"


def test_again_adds_nothing_and_a_changed_image_supersedes(tmp_path, store):
    d = _folder(tmp_path)
    ct("-C", store.root, "ingest-any", d)
    n = len(commits(store.root))
    again = json.loads(ct("-C", store.root, "ingest-any", d, "--json").stdout)
    assert again["added"] == 0 and again["commit"] is None and len(commits(store.root)) == n

    (d / "whiteboard.png").write_bytes(png(128, 96))
    res = json.loads(ct("-C", store.root, "ingest-any", d, "--json").stdout)
    assert res["added"] == 2  # the new description and the meta record that retires the old one
    recs = _records(store.root)
    sup = [r for r in recs if r["type"] == "meta"]
    old = [
        r
        for r in recs
        if r.get("source", {}).get("rel") == "whiteboard.png" and "64×48" in r["text"]
    ]
    assert sup[0]["supersedes"] == [old[0]["id"]]
    hits = json.loads(
        ct(
            "-C",
            store.root,
            "search",
            "whiteboard png",
            "--mode",
            "exact",
            "--type",
            "doc",
            "--json",
        ).stdout
    )["hits"]
    assert [h for h in hits if h["source"]["rel"] == "whiteboard.png"][0]["text"].count(
        "128×96"
    ) == 1
    assert not any("64×48" in h["text"] for h in hits)
    assert git_clean(store.root) and json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]


def test_size_limit_skips_with_a_message_and_never_truncates(tmp_path, store):
    d = _folder(tmp_path)
    proc = ct("-C", store.root, "ingest-any", d, "--max-bytes", "5000")
    assert f"skipped {d / 'firmware.bin'}: 10240 bytes exceeds --max-bytes 5000" in proc.stderr
    rels = {r["source"]["rel"] for r in _records(store.root)}
    assert "firmware.bin" not in rels and "whiteboard.png" in rels
    for r in _records(store.root):
        if "blob" in r["source"]:
            assert _blob(store.root, r)[1] == (d / r["source"]["rel"]).read_bytes()


def test_a_single_empty_file_is_refused_and_nothing_changes(tmp_path, store):
    f = tmp_path / "empty.dat"
    f.write_bytes(b"")
    proc = ct("-C", store.root, "ingest-any", f, check=False)
    assert proc.returncode == 4 and f"{f}: empty file" in proc.stderr
    assert len(commits(store.root)) == 1 and git_clean(store.root)


def test_fsck_checks_blobs(tmp_path, store):
    d = _folder(tmp_path)
    ct("-C", store.root, "ingest-any", d)
    img = [r for r in _records(store.root) if r["source"]["rel"] == "holiday_photo.jpg"][0]
    pack_path, (bh, body), _ = _blob_pack(store.root, img)
    data = bytearray(pack_path.read_bytes())
    data[-len(body) // 2] ^= 0xFF  # a byte of the sealed original (sealed: it no longer opens)
    pack_path.write_bytes(bytes(data))
    proc = ct("-C", store.root, "fsck", "--json", check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    assert any(
        "do not hash to the file name" in p and pack_path.name in p for p in report["damage"]
    )
    pack_path.unlink()
    report = json.loads(ct("-C", store.root, "fsck", "--json", check=False).stdout)
    assert any("has no vector in packs/" in p for p in report["damage"])
    assert any("its original file" in p and "is in no pack" in p for p in report["damage"])


def test_python_api(tmp_path, store):
    d = _folder(tmp_path)
    res = store.ingest_any(d)
    assert len(res.added) == 6
    from memstore.ingest.any import read_blob

    rec = [r for r in res.added if r["source"]["rel"] == "standup-recording.wav"][0]
    body, manifest = read_blob(store, rec)
    assert body == (d / "standup-recording.wav").read_bytes() and manifest["channels"] == 1


def mp4(seconds: float, w: int, h: int, created_unix: int) -> bytes:
    """ftyp + moov(mvhd v0, trak(tkhd v0)) — the boxes a reader needs for duration, date and frame size."""

    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body

    scale = 1000
    created = created_unix + 2082844800
    mvhd = (
        b"\x00\x00\x00\x00"
        + struct.pack(">IIII", created, created, scale, int(seconds * scale))
        + b"\x00" * 80
    )
    tkhd = (
        b"\x00\x00\x00\x07"
        + struct.pack(">IIIII", created, created, 1, 0, int(seconds * scale))
        + b"\x00" * 8
        + b"\x00" * 8
        + b"\x00" * 36
        + struct.pack(">II", w << 16, h << 16)
    )
    return box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2mp41") + box(
        b"moov", box(b"mvhd", mvhd) + box(b"trak", box(b"tkhd", tkhd))
    )


def test_media_facts_read_from_headers():
    from memstore.ingest.media import describe_media, description

    info = describe_media("clip.mp4", mp4(12.5, 1920, 1080, 1700000000) + b"\x00" * 100)
    assert info == {
        "mime": "video/mp4",
        "kind": "video",
        "duration_s": 12.5,
        "taken": "2023-11-14 22:13:20",
        "width": 1920,
        "height": 1080,
    }
    assert description("clips/clip.mp4", 2_000_000, info).startswith(
        "Video clips/clip.mp4: MP4 video, 1920×1080 pixels, taken 2023-11-14 22:13:20, 12.5 seconds, 1.9 MB"
    )
    assert describe_media("a.gif", b"GIF89a\x10\x00\x20\x00")["height"] == 32
    assert describe_media("x.png", png(3, 5))["width"] == 3
    assert describe_media("noise.jpg", b"\xff\xd8\xff\xe0garbage") == {
        "mime": "image/jpeg",
        "kind": "image",
    }
    assert describe_media("song.wav", wav(0.5))["duration_s"] == 0.5
    assert describe_media("mystery", b"\x00\x01\x02")["kind"] == "binary"


def test_a_pdf_without_text_is_kept_as_a_blob(tmp_path, store):
    f = tmp_path / "scan.pdf"
    f.write_bytes(pdf(""))
    res = store.ingest_any(f)
    (rec,) = res.added
    assert rec["id"].startswith("blob:") and rec["text"].startswith("PDF scan.pdf: PDF document")
    assert "No text was extracted (PDF has no extractable text" in rec["text"]
    bh, body, _, manifest = _blob(store.root, rec)
    assert bh.data_type == DT_BLOB and body == f.read_bytes() and manifest["kind"] == "pdf"
    assert git_clean(store.root)


def test_blobs_of_an_interrupted_write_are_rolled_back(tmp_path, store):
    from memstore.store import Store

    d = tmp_path / "in"
    d.mkdir()
    (d / "a.png").write_bytes(png(4, 4))

    def killed(*_a, **_k):  # dies after the blob is queued, before any pack or record is on disk
        raise KeyboardInterrupt

    store._write_files = killed
    try:
        store.ingest_any(d)
    except KeyboardInterrupt:
        pass
    again = Store.open(store.root)
    again.index()  # the failed writer, or at the latest the next reader, rolls back what it left
    assert [p for p in store.root.glob("packs/**/*") if p.is_file()] == []
    assert git_clean(store.root) and len(commits(store.root)) == 1
    rep = again.fsck()
    assert rep.ok and not rep.warnings
    assert len(again.ingest_any(d).added) == 1 and again.fsck().ok and git_clean(store.root)


def test_an_unreferenced_blob_pair_is_an_orphan(store):
    from memstore.format.segment import DT_IMAGE

    w = packfmt.PackWriter("2026-11-30", 384)
    w.add_blob("blob:nobody", bytes(32), png(2, 2), DT_IMAGE, {"filename": "x.png"}, 1764500000)
    w.write(store.root)  # sealed under a key no line holds: nothing opens it, nothing names it
    rep = store.fsck()
    assert rep.ok and [w for w in rep.warnings if "orphan" in w] == []
