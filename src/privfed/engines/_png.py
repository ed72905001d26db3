"""A small, dependency-free PNG writer for image grids (numpy + the standard library).

The main job writes one grid of synthetic samples per run.  Drawing it with
matplotlib cost more than a second of imports and layout on every run, for a
picture that needs no axes: this module tiles the images itself, labels each
row with its class number in a built-in 3x5 pixel font, and encodes an 8-bit
greyscale or RGB PNG (filter type 0, zlib-compressed, CRC-checked chunks, a
``tEXt`` title) with :mod:`zlib` and :mod:`struct`.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from privfed._atomic import atomic_write_bytes

__all__ = ["captioned", "encode_png", "label_glyphs", "sample_grid", "write_sample_grid"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# 3 columns x 5 rows per digit, one string of 15 bits per glyph, row by row.
_GLYPHS = {
    "0": "111101101101111",
    "1": "010110010010111",
    "2": "111001111100111",
    "3": "111001111001111",
    "4": "101101111001001",
    "5": "111100111001111",
    "6": "111100111101111",
    "7": "111001010010010",
    "8": "111101111101111",
    "9": "111101111001111",
    "-": "000000111000000",
}
# Letters (drawn as capitals) and the punctuation of captions, in the same 3x5 grid.
_GLYPHS.update(
    {
        "a": "010101111101101",
        "b": "110101110101110",
        "c": "011100100100011",
        "d": "110101101101110",
        "e": "111100110100111",
        "f": "111100110100100",
        "g": "011100101101011",
        "h": "101101111101101",
        "i": "111010010010111",
        "j": "001001001101010",
        "k": "101101110101101",
        "l": "100100100100111",
        "m": "101111111101101",
        "n": "110101101101101",
        "o": "010101101101010",
        "p": "110101110100100",
        "q": "010101101110011",
        "r": "110101110101101",
        "s": "011100010001110",
        "t": "111010010010010",
        "u": "101101101101111",
        "v": "101101101101010",
        "w": "101101111111101",
        "x": "101101010101101",
        "y": "101101010010010",
        "z": "111001010100111",
        "=": "000111000111000",
        ".": "000000000000010",
        "/": "001001010100100",
        ":": "000010000010000",
        "(": "010100100100010",
        ")": "010001001001010",
        ",": "000000000010100",
        "+": "000010111010000",
        "_": "000000000000111",
        " ": "000000000000000",
    }
)


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def encode_png(pixels: np.ndarray, *, title: str | None = None) -> bytes:
    """Encode ``pixels`` as PNG bytes.

    Args:
        pixels: ``uint8`` array ``(H, W)`` (greyscale) or ``(H, W, 3)`` (RGB),
            ``H, W >= 1``.
        title: Optional text stored in a ``tEXt`` chunk under the key ``Title``
            (Latin-1).

    Returns:
        A complete PNG file.

    Raises:
        ValueError: On a wrong dtype or shape (an internal helper: callers
            build the array themselves).
    """
    if pixels.dtype != np.uint8:
        raise ValueError(f"pixels must be uint8, got {pixels.dtype}")
    if pixels.ndim == 2:
        colour_type, channels = 0, 1
    elif pixels.ndim == 3 and pixels.shape[2] == 3:
        colour_type, channels = 2, 3
    else:
        raise ValueError(f"pixels must be (H, W) or (H, W, 3), got {pixels.shape}")
    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    if height < 1 or width < 1:
        raise ValueError(f"pixels must be at least 1x1, got {pixels.shape}")
    rows = np.ascontiguousarray(pixels).reshape(height, width * channels)
    # Filter type 0 ("None") before every scanline.
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    parts = [_PNG_SIGNATURE, _chunk(b"IHDR", header)]
    if title:
        parts.append(_chunk(b"tEXt", b"Title\x00" + title.encode("latin-1", "replace")))
    parts.append(_chunk(b"IDAT", zlib.compress(raw, 6)))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)


def label_glyphs(text: str, scale: int = 2) -> np.ndarray:
    """A boolean bitmap ``(5*scale, (4*len(text) - 1)*scale)`` of ``text``.

    Digits, letters (drawn as capitals) and ``-=./:(),+_`` have glyphs; other
    characters are drawn as blanks.
    """
    columns: list[np.ndarray] = []
    for index, char in enumerate(text):
        if index:
            columns.append(np.zeros((5, 1), dtype=bool))
        bits = _GLYPHS.get(char.lower(), "0" * 15)
        columns.append(np.array([bit == "1" for bit in bits], dtype=bool).reshape(5, 3))
    if not columns:
        return np.zeros((5 * scale, 0), dtype=bool)
    glyphs = np.concatenate(columns, axis=1)
    return np.repeat(np.repeat(glyphs, scale, axis=0), scale, axis=1)


def sample_grid(
    images: np.ndarray, labels: np.ndarray, *, per_class: int = 8, min_cell: int = 32
) -> np.ndarray:
    """Tile up to ``per_class`` images of every class into one ``uint8`` mosaic.

    One row per class in increasing label order, its label drawn in black on
    the left margin; images are enlarged by the integer factor that makes a
    cell at least ``min_cell`` pixels (nearest neighbour), separated by
    two-pixel white gaps; cells without an image stay white.

    Args:
        images: ``(s, C, H, W)`` floats in ``[0, 1]`` (values outside are clipped),
            ``C`` = 1 or 3.
        labels: ``(s,)`` integer labels.
        per_class: Columns.
        min_cell: Smallest cell edge in pixels after enlarging.

    Returns:
        ``(rows, cols)`` greyscale or ``(rows, cols, 3)`` RGB ``uint8`` pixels.
    """
    classes = sorted(int(c) for c in np.unique(labels)) if labels.size else []
    channels, height, width = (int(v) for v in images.shape[1:4])
    factor = max(1, -(-min_cell // max(height, width)))
    cell_h, cell_w = height * factor, width * factor
    gap, scale = 2, 2
    label_texts = [str(c) for c in classes]
    margin = max((label_glyphs(t, scale).shape[1] for t in label_texts), default=0) + 2 * gap
    rows = max(1, len(classes))
    canvas = np.full(
        (gap + rows * (cell_h + gap), margin + per_class * (cell_w + gap), channels),
        255,
        dtype=np.uint8,
    )
    for r, cls in enumerate(classes):
        top = gap + r * (cell_h + gap)
        glyphs = label_glyphs(label_texts[r], scale)
        g_top = top + max(0, (cell_h - glyphs.shape[0]) // 2)
        region = canvas[g_top : g_top + glyphs.shape[0], gap : gap + glyphs.shape[1]]
        region[glyphs[: region.shape[0], : region.shape[1]]] = 0
        picks = np.flatnonzero(labels == cls)[:per_class]
        for col, pick in enumerate(picks):
            left = margin + col * (cell_w + gap)
            tile = np.transpose(np.asarray(images[pick], dtype=np.float64), (1, 2, 0))
            tile = np.nan_to_num(tile, nan=1.0)
            tile = np.rint(np.clip(tile, 0.0, 1.0) * 255.0).astype(np.uint8)
            tile = np.repeat(np.repeat(tile, factor, axis=0), factor, axis=1)
            canvas[top : top + cell_h, left : left + cell_w] = tile
    return canvas[:, :, 0] if channels == 1 else canvas


def captioned(pixels: np.ndarray, lines: list[str], *, scale: int = 2) -> np.ndarray:
    """``pixels`` under ``lines`` of black caption text on white (widened to fit)."""
    if not lines:
        return pixels
    gap = 2 * scale
    bitmaps = [label_glyphs(line, scale) for line in lines]
    text_h = sum(b.shape[0] + gap for b in bitmaps) + gap
    width = max(pixels.shape[1], max(b.shape[1] for b in bitmaps) + 2 * gap)
    shape = (text_h + pixels.shape[0], width, *pixels.shape[2:])
    canvas = np.full(shape, 255, dtype=np.uint8)
    top = gap
    for bitmap in bitmaps:
        region = canvas[top : top + bitmap.shape[0], gap : gap + bitmap.shape[1]]
        region[bitmap] = 0
        top += bitmap.shape[0] + gap
    canvas[text_h:, : pixels.shape[1]] = pixels
    return canvas


def write_sample_grid(
    images: np.ndarray,
    labels: np.ndarray,
    path: str | Path,
    *,
    per_class: int = 8,
    title: str = "synthetic samples per class",
    caption: str | None = None,
    max_classes: int | None = None,
) -> None:
    """Write :func:`sample_grid` of ``images`` as a PNG file at ``path``.

    ``caption`` is drawn above the grid (and stored as the ``tEXt`` title);
    with ``max_classes`` only the first that many classes are drawn and a
    caption line says how many were omitted.
    """
    classes = np.unique(labels) if labels.size else np.zeros(0, dtype=np.int64)
    lines = [] if caption is None else [caption]
    if max_classes is not None and classes.size > max_classes:
        keep = np.isin(labels, classes[:max_classes])
        images, labels = images[keep], labels[keep]
        omitted = int(classes.size - max_classes)
        lines.append(
            f"showing {max_classes} of {classes.size} classes ({omitted} omitted; "
            "all in synthetic.npz)"
        )
    pixels = captioned(sample_grid(images, labels, per_class=per_class), lines)
    text = title if caption is None else f"{title}: {caption}"
    atomic_write_bytes(path, encode_png(pixels, title=text))
