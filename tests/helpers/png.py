"""Read a PNG's pixels with the standard library (8-bit RGB/RGBA, not interlaced: what
headless Chromium writes), so a screenshot test can look at what was drawn."""

from __future__ import annotations

import struct
import zlib


def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows); each row holds width x channels bytes (RGB or RGBA)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, [], 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth} colour {colour}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    i = 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def count_colour(png: tuple[int, int, list[bytes]], rgb: tuple[int, int, int],
                 tolerance: int = 24) -> int:
    """Pixels within ``tolerance`` (per channel) of ``rgb``."""
    width, _, rows = png
    channels = len(rows[0]) // width if rows else 3
    n = 0
    r0, g0, b0 = rgb
    for row in rows:
        for x in range(0, len(row), channels):
            if abs(row[x] - r0) <= tolerance and abs(row[x + 1] - g0) <= tolerance and \
                    abs(row[x + 2] - b0) <= tolerance:
                n += 1
    return n
