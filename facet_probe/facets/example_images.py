"""The plain coloured squares the facets' example items show (bytes encoded here, digests stable)."""

from __future__ import annotations

import struct
import zlib

from facet_probe.core.items import ImageRef

#: The colours of the example images.
RGB = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 220), "yellow": (240, 210, 30)}


def square_png(color: str, size: int = 16) -> ImageRef:
    """A plain coloured square as PNG bytes, encoded here (uncompressed deflate) so its digest, and
    the example prompts' hashes in docs/facets.md, do not depend on the Pillow or zlib build."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    row = b"\x00" + bytes(RGB[color]) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size, 0))
           + chunk(b"IEND", b""))
    return ImageRef.from_bytes(png)
