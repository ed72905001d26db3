"""privfed's PNG writer: a decoder written here and matplotlib's reader read back its pixels."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from privfed.engines._png import encode_png, label_glyphs, sample_grid, write_sample_grid


def _decode(data: bytes) -> tuple[np.ndarray, dict[bytes, bytes]]:
    """Minimal reader for what encode_png writes (8-bit, filter 0), checking every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, idat = 8, {}, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        payload = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + payload) & 0xFFFFFFFF, kind
        if kind == b"IDAT":
            idat += payload
        else:
            chunks[kind] = payload
        pos += 12 + length
    assert list(chunks)[-1] == b"IEND"
    width, height, depth, colour, _, _, _ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8
    channels = {0: 1, 2: 3}[colour]
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
    assert np.all(raw[:, 0] == 0)
    pixels = raw[:, 1:].reshape(height, width, channels)
    return (pixels[:, :, 0] if channels == 1 else pixels), chunks


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (5, 4, 3), (1, 9, 3)])
def test_round_trip(shape: tuple[int, ...]) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
    decoded, chunks = _decode(encode_png(pixels, title="grid"))
    assert np.array_equal(decoded, pixels)
    assert chunks[b"tEXt"] == b"Title\x00grid"


def test_matplotlib_reads_the_same_pixels(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from matplotlib import image  # a dev dependency: an independent PNG reader

    pixels = np.random.default_rng(1).integers(0, 256, size=(6, 10, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    path.write_bytes(encode_png(pixels))
    read = image.imread(path)
    assert np.array_equal(np.rint(read * 255).astype(np.uint8), pixels)


def test_bad_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="H, W"):
        encode_png(np.zeros((2, 2, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="1x1"):
        encode_png(np.zeros((0, 3), dtype=np.uint8))


def test_glyphs_are_distinct_and_sized() -> None:
    digits = [label_glyphs(str(d), scale=1) for d in range(10)]
    assert all(g.shape == (5, 3) for g in digits)
    assert len({g.tobytes() for g in digits}) == 10
    assert label_glyphs("12", scale=2).shape == (10, 14)


def test_grid_places_every_image_in_its_class_row() -> None:
    rng = np.random.default_rng(2)
    images = rng.random((12, 1, 4, 4))
    labels = np.array([5, 2, 5, 2, 2, 9, 5, 2, 5, 5, 5, 5])
    grid = sample_grid(images, labels, per_class=3, min_cell=8)  # factor 2: 8x8 cells
    assert grid.dtype == np.uint8 and grid.ndim == 2
    gap, cell = 2, 8
    margin = label_glyphs("9", 2).shape[1] + 2 * gap
    for row, cls in enumerate([2, 5, 9]):
        picks = np.flatnonzero(labels == cls)[:3]
        for col in range(3):
            top, left = gap + row * (cell + gap), margin + col * (cell + gap)
            tile = grid[top : top + cell, left : left + cell]
            if col < picks.size:
                expected = np.rint(np.clip(images[picks[col], 0], 0, 1) * 255).astype(np.uint8)
                assert np.array_equal(tile, np.kron(expected, np.ones((2, 2), dtype=np.uint8)))
            else:
                assert np.all(tile == 255)  # class 9 has one image: the rest stays white
        # The label is drawn (black pixels) in the left margin of its row.
        assert np.any(grid[top : top + cell, :margin] == 0)


def test_rgb_grid_is_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    images = np.random.default_rng(3).random((4, 3, 5, 5))
    path = tmp_path / "g.png"
    write_sample_grid(images, np.array([0, 1, 1, 0]), path, per_class=2)
    decoded, chunks = _decode(path.read_bytes())
    assert decoded.ndim == 3 and decoded.shape[2] == 3
    assert chunks[b"tEXt"].startswith(b"Title\x00synthetic")
