"""Slow, independent pure-Python references for the primitives' known-answer tests.

Nothing here shares code with privfed or with OpenSSL: AES-256 is written out
from FIPS-197 (S-box computed from the GF(2**8) inverse and the affine map), and
the mask PRG semantics are re-implemented one word at a time.  Only for short
vectors: about 10^4 blocks per second.
"""

from __future__ import annotations


def _xtime(a: int) -> int:
    a <<= 1
    return (a ^ 0x11B) & 0xFF if a & 0x100 else a


def _gmul(a: int, b: int) -> int:
    out = 0
    while b:
        if b & 1:
            out ^= a
        a = _xtime(a)
        b >>= 1
    return out


def _make_sbox() -> list[int]:
    sbox = []
    for x in range(256):
        inv = 0 if x == 0 else next(y for y in range(1, 256) if _gmul(x, y) == 1)
        s = inv
        for shift in range(1, 5):
            s ^= ((inv << shift) | (inv >> (8 - shift))) & 0xFF
        sbox.append(s ^ 0x63)
    return sbox


SBOX = _make_sbox()


def _expand_key_256(key: bytes) -> list[list[int]]:
    """FIPS-197 §5.2 key expansion for Nk = 8, Nr = 14: 15 round keys of 16 bytes."""
    assert len(key) == 32
    words = [list(key[4 * i : 4 * i + 4]) for i in range(8)]
    rcon = 1
    for i in range(8, 60):
        temp = list(words[i - 1])
        if i % 8 == 0:
            temp = temp[1:] + temp[:1]
            temp = [SBOX[b] for b in temp]
            temp[0] ^= rcon
            rcon = _xtime(rcon)
        elif i % 8 == 4:
            temp = [SBOX[b] for b in temp]
        words.append([a ^ b for a, b in zip(words[i - 8], temp, strict=True)])
    return [[b for w in words[4 * r : 4 * r + 4] for b in w] for r in range(15)]


def aes256_encrypt_block(key: bytes, block: bytes) -> bytes:
    """Encrypt one 16-byte block with AES-256 (FIPS-197 §5.1); state is column-major."""
    round_keys = _expand_key_256(key)
    state = [b ^ k for b, k in zip(block, round_keys[0], strict=True)]
    for rnd in range(1, 15):
        state = [SBOX[b] for b in state]
        # ShiftRows: byte (row r, column c) sits at index 4c + r.
        state = [state[4 * ((c + r) % 4) + r] for c in range(4) for r in range(4)]
        if rnd != 14:
            mixed = []
            for c in range(4):
                a = state[4 * c : 4 * c + 4]
                mixed += [
                    _gmul(a[0], 2) ^ _gmul(a[1], 3) ^ a[2] ^ a[3],
                    a[0] ^ _gmul(a[1], 2) ^ _gmul(a[2], 3) ^ a[3],
                    a[0] ^ a[1] ^ _gmul(a[2], 2) ^ _gmul(a[3], 3),
                    _gmul(a[0], 3) ^ a[1] ^ a[2] ^ _gmul(a[3], 2),
                ]
            state = mixed
        state = [b ^ k for b, k in zip(state, round_keys[rnd], strict=True)]
    return bytes(state)


def aes256_ctr_keystream(key: bytes, nbytes: int, *, first_block: int = 0, iv: int = 0) -> bytes:
    """Keystream of AES-256-CTR with a 128-bit big-endian counter starting at ``iv``."""
    out = bytearray()
    block = first_block
    while len(out) < nbytes:
        counter = (iv + block) % 2**128
        out += aes256_encrypt_block(key, counter.to_bytes(16, "big"))
        block += 1
    return bytes(out[:nbytes])


def word_at(seed: bytes, index: int) -> int:
    """Keystream word ``index`` (bytes 8*index .. 8*index+8, little-endian), by seeking."""
    block = aes256_ctr_keystream(seed, 16, first_block=index // 2)
    half = index % 2
    return int.from_bytes(block[8 * half : 8 * half + 8], "little")


def expand_reference(seed: bytes, length: int, modulus_bits: int) -> list[int]:
    stream = aes256_ctr_keystream(seed, 8 * length)
    mask = (1 << modulus_bits) - 1
    return [int.from_bytes(stream[8 * i : 8 * i + 8], "little") & mask for i in range(length)]


def expand_mod_reference(seed: bytes, length: int, modulus: int) -> list[int]:
    limit = (2**64 // modulus) * modulus
    out: list[int] = []
    index = 0
    while len(out) < length:
        w = word_at(seed, index)
        index += 1
        if w < limit:
            out.append(w % modulus)
    return out
