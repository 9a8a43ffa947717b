"""What a binary file says about itself without a model: type, image size and EXIF date, audio duration.

Only headers are parsed (PNG, GIF, JPEG with EXIF, WebP, BMP; WAV through the standard `wave`
module, FLAC's STREAMINFO), so no imaging or audio library is needed. A damaged header yields fewer
fields, never an error: the file is still kept whole.
"""

from __future__ import annotations

import io
import mimetypes
import struct
import wave
from pathlib import Path

# (magic prefix, mime) for files whose extension lies or is missing
_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"BM", "image/bmp"),
    (b"%PDF-", "application/pdf"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
]


def sniff_mime(name: str, data: bytes) -> str:
    """The file's media type, from its first bytes when they are telling, else from its name."""
    if data[:4] == b"RIFF" and data[8:12] in (b"WAVE", b"WEBP", b"AVI "):
        return {b"WAVE": "audio/wav", b"WEBP": "image/webp", b"AVI ": "video/x-msvideo"}[data[8:12]]
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        return (
            "audio/mp4"
            if brand in (b"M4A ", b"M4B ")
            else ("video/quicktime" if brand == b"qt  " else "video/mp4")
        )
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "video/webm" if b"webm" in data[:64] else "video/x-matroska"
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def media_kind(mime: str) -> str:
    """image | audio | video | pdf | binary."""
    if mime == "application/pdf":
        return "pdf"
    top = mime.split("/", 1)[0]
    return top if top in ("image", "audio", "video") else "binary"


def describe_media(name: str, data: bytes) -> dict:
    """Every fact that can be read from the bytes: mime, kind, and per kind width/height/taken or duration."""
    mime = sniff_mime(name, data)
    info: dict = {"mime": mime, "kind": media_kind(mime)}
    try:
        if info["kind"] == "image":
            info.update(_image_info(data))
        elif info["kind"] == "audio":
            info.update(_audio_info(data))
        if info["kind"] in ("audio", "video") and data[4:8] == b"ftyp":
            info.update(_mp4_info(data))
    except (struct.error, ValueError, IndexError, EOFError, wave.Error, ArithmeticError, OSError):
        pass  # a damaged header gives fewer facts; the bytes are kept regardless
    return info


# ----- images ------------------------------------------------------------------------------------


def _image_info(data: bytes) -> dict:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return {"width": w, "height": h}
    if data[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", data[6:10])
        return {"width": w, "height": h}
    if data.startswith(b"BM"):
        w, h = struct.unpack("<ii", data[18:26])
        return {"width": w, "height": abs(h)}
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_info(data)
    return {}


def _webp_size(data: bytes) -> dict:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return {"width": w & 0x3FFF, "height": h & 0x3FFF}
    if chunk == b"VP8L":
        b = data[21:25]
        w = 1 + (((b[1] & 0x3F) << 8) | b[0])
        h = 1 + (((b[3] & 0x0F) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
        return {"width": w, "height": h}
    if chunk == b"VP8X":
        w = 1 + int.from_bytes(data[24:27], "little")
        h = 1 + int.from_bytes(data[27:30], "little")
        return {"width": w, "height": h}
    return {}


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg_info(data: bytes) -> dict:
    """Walk the JPEG markers up to the frame header: size from SOFn, date from the EXIF APP1 segment."""
    out: dict = {}
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            break
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        seg_len = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        body = data[pos + 4 : pos + 2 + seg_len]
        if marker == 0xE1 and body.startswith(b"Exif\x00\x00"):
            taken = _exif_datetime(body[6:])
            if taken:
                out["taken"] = taken
        elif marker in _SOF:
            h, w = struct.unpack(">HH", body[1:5])
            out.update(width=w, height=h)
            break
        elif marker == 0xDA:  # start of scan: no frame header found before the image data
            break
        pos += 2 + seg_len
    return out


def _exif_datetime(tiff: bytes) -> str | None:
    """DateTimeOriginal (else DateTime) from a TIFF/EXIF block, as "YYYY-MM-DD HH:MM:SS"."""
    if tiff[:2] == b"II":
        e = "<"
    elif tiff[:2] == b"MM":
        e = ">"
    else:
        return None
    ifd0 = struct.unpack(e + "I", tiff[4:8])[0]
    tags0 = _ifd(tiff, ifd0, e)
    found = None
    if 0x8769 in tags0:  # pointer to the EXIF sub-IFD, where DateTimeOriginal lives
        sub = _ifd(tiff, _value_u32(tags0[0x8769], e), e)
        found = _ascii(tiff, sub.get(0x9003), e)
    found = found or _ascii(tiff, tags0.get(0x0132), e)
    if not found or len(found) < 19:
        return None
    date, _, clock = found[:19].partition(" ")
    return f"{date.replace(':', '-')} {clock}"


def _ifd(tiff: bytes, off: int, e: str) -> dict[int, tuple]:
    count = struct.unpack(e + "H", tiff[off : off + 2])[0]
    tags = {}
    for i in range(min(count, 512)):
        entry = tiff[off + 2 + 12 * i : off + 14 + 12 * i]
        if len(entry) < 12:
            break
        tag, typ, n = struct.unpack(e + "HHI", entry[:8])
        tags[tag] = (typ, n, entry[8:12])
    return tags


def _value_u32(entry: tuple, e: str) -> int:
    return struct.unpack(e + "I", entry[2])[0]


def _ascii(tiff: bytes, entry: tuple | None, e: str) -> str | None:
    if entry is None or entry[0] != 2:
        return None
    n = entry[1]
    raw = entry[2][:n] if n <= 4 else tiff[struct.unpack(e + "I", entry[2])[0] :][:n]
    text = raw.split(b"\x00", 1)[0].decode("ascii", "replace").strip()
    return text or None


# ----- audio -------------------------------------------------------------------------------------


def _audio_info(data: bytes) -> dict:
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        with wave.open(io.BytesIO(data)) as w:
            rate = w.getframerate()
            return {
                "duration_s": round(w.getnframes() / rate, 3) if rate else None,
                "sample_rate": rate,
                "channels": w.getnchannels(),
                "bits": 8 * w.getsampwidth(),
            }
    if data.startswith(b"fLaC") and (data[4] & 0x7F) == 0:  # first metadata block is STREAMINFO
        info = data[8 : 8 + 34]
        packed = int.from_bytes(info[10:18], "big")
        rate = packed >> 44
        channels = ((packed >> 41) & 0x7) + 1
        bits = ((packed >> 36) & 0x1F) + 1
        total = packed & 0xFFFFFFFFF
        out = {"sample_rate": rate, "channels": channels, "bits": bits}
        if rate and total:
            out["duration_s"] = round(total / rate, 3)
        return out
    return {}


# ----- MP4 / QuickTime ---------------------------------------------------------------------------

_MP4_EPOCH = 2082844800  # seconds from 1904-01-01 (the format's epoch) to 1970-01-01


def _boxes(data: bytes, start: int, end: int):
    """(type, body start, body end) of each box between start and end."""
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        head = 8
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8 : pos + 16])[0]
            head = 16
        elif size == 0:
            size = end - pos
        if size < head:
            return
        yield kind, pos + head, min(pos + size, end)
        pos += size


def _mp4_info(data: bytes) -> dict:
    """Duration and creation time from `moov/mvhd`, frame size from the first video track's `tkhd`."""
    import datetime as dt

    out: dict = {}
    for kind, b, e in _boxes(data, 0, len(data)):
        if kind != b"moov":
            continue
        for sub, sb, se in _boxes(data, b, e):
            if sub == b"mvhd":
                v = data[sb]
                if v == 1:
                    created, _, scale, dur = struct.unpack(">QQIQ", data[sb + 4 : sb + 32])
                else:
                    created, _, scale, dur = struct.unpack(">IIII", data[sb + 4 : sb + 20])
                if scale:
                    out["duration_s"] = round(dur / scale, 3)
                if created > _MP4_EPOCH:
                    try:
                        when = dt.datetime.fromtimestamp(created - _MP4_EPOCH, dt.timezone.utc)
                    except (OverflowError, OSError, ValueError):  # a 64-bit time past year 9999
                        continue  # no date, but the duration and frame size still count
                    out["taken"] = when.strftime("%Y-%m-%d %H:%M:%S")
            elif sub == b"trak" and "width" not in out:
                for tk, tb, te in _boxes(data, sb, se):
                    if tk == b"tkhd":
                        off = tb + (88 if data[tb] == 1 else 76)
                        w, h = struct.unpack(">II", data[off : off + 8])
                        if w >> 16 and h >> 16:
                            out.update(width=w >> 16, height=h >> 16)
        break
    return out


# ----- words -------------------------------------------------------------------------------------


def human_size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def description(rel: str, size: int, info: dict, reason: str | None = None) -> str:
    """The searchable text record for a blob: every fact, in words, with the file's name and path."""
    kind = info.get("kind", "binary")
    subtype = info.get("mime", "application/octet-stream").split("/", 1)[1].upper()
    what = {
        "image": f"{subtype} image",
        "audio": f"{subtype} audio",
        "video": f"{subtype} video",
        "pdf": "PDF document",
    }.get(kind, f"file of type {info.get('mime')}")
    label = {"image": "Image", "audio": "Audio", "video": "Video", "pdf": "PDF"}.get(kind, "File")
    parts = [f"{label} {rel}: {what}"]
    if info.get("width") and info.get("height"):
        parts.append(f"{info['width']}×{info['height']} pixels")
    if info.get("taken"):
        parts.append(f"taken {info['taken']}")
    if info.get("duration_s") is not None:
        parts.append(f"{info['duration_s']:g} seconds")
    if info.get("sample_rate"):
        parts.append(
            f"{info['sample_rate']} Hz, {info.get('channels')} channel(s), {info.get('bits')}-bit"
        )
    parts.append(human_size(size) + ("" if size < 1024 else f" ({size} bytes)"))
    text = ", ".join(parts) + "."
    stem = Path(rel).stem.replace("_", " ").replace("-", " ")
    text += f" Name: {stem}."
    if reason and kind == "pdf":
        text += f" No text was extracted ({reason})."
    return text + " The original is stored whole as a blob segment."
