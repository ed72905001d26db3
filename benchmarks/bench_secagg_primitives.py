"""Benchmark the secure-aggregation primitives against simple baselines.

Usage::

    python benchmarks/bench_secagg_primitives.py            # default, well under 2 minutes
    python benchmarks/bench_secagg_primitives.py --quick    # a few seconds, fewer repeats

Prints one table, writes ``benchmarks/results/secagg_primitives.json`` and, when
matplotlib is installed, ``benchmarks/results/secagg_primitives_combine.png``
(combine time against the number of shares, threshold 51).

Rows and their baselines (all in the same run, same process):

* mask PRG ``expand`` for one 83,850-element mask (the latent-statistic payload
  at d = 64): privfed (AES-256-CTR) against the ChaCha20 keystream (the other
  candidate cipher) and against numpy's MT19937 (the insecure PRG of some public
  implementations, shown only for scale);
* Shamir ``combine`` 51-of-90 with the full consistency check, and 51-of-51,
  against a naive Lagrange interpolation with one modular inversion per term;
* Shamir ``split`` 51-of-100; X25519 ``agree``; HKDF ``derive_key``;
  ``pairwise_key`` (module functions and the faster ``KeyPair`` methods);
  AEAD ``seal``/``unseal`` of one share pair;
  ``FixedPointConfig.encode`` of 83,850 values.

Timings are the minimum of several repeats (each the mean of an inner loop), in
microseconds; treat them as provisional on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from privfed.secagg.primitives import aead, fixedpoint, keys, prg, shamir

RESULTS = Path(__file__).resolve().parent / "results"
MASK_LENGTH = 83_850


def _time(fn: Callable[[], object], *, repeats: int, inner: int) -> float:
    """Minimum over ``repeats`` of the mean time of ``inner`` calls, in microseconds.

    The minimum is the least disturbed estimate on a shared machine (other
    processes only ever add time).
    """
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    return min(samples)


_ZEROS = bytes(8 * MASK_LENGTH)


def _chacha20_expand(seed: bytes, length: int) -> np.ndarray:
    """The same construction as privfed's expand with ChaCha20 (reused zero plaintext)."""
    encryptor = Cipher(algorithms.ChaCha20(seed, bytes(16)), mode=None).encryptor()
    return np.frombuffer(encryptor.update(memoryview(_ZEROS)[: 8 * length]), dtype="<u8")


def _mt19937_expand(seed: bytes, length: int) -> np.ndarray:
    rng = np.random.Generator(np.random.MT19937(int.from_bytes(seed[:4], "little")))
    return rng.integers(0, 2**64, size=length, dtype=np.uint64, endpoint=False)


def _naive_combine(shares: list[shamir.Share], threshold: int) -> bytes:
    """Textbook Lagrange at 0 with one inversion per term, no consistency check."""
    p = shamir.PRIME
    xs = [s.index for s in shares[:threshold]]
    total = 0
    for i, s in enumerate(shares[:threshold]):
        num, den = 1, 1
        for m, xm in enumerate(xs):
            if m != i:
                num = num * (-xm) % p
                den = den * (s.index - xm) % p
        total = (total + s.value * num * pow(den, -1, p)) % p
    return total.to_bytes(32, "big")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (smoke test)")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 9

    seed = os.urandom(32)
    secret = os.urandom(32)
    shares = shamir.split(secret, threshold=51, num_shares=100)
    alice, bob = keys.KeyPair.generate(), keys.KeyPair.generate()
    shared = keys.agree(alice.private_key, bob.public_key)
    context: dict[str, Any] = {
        "purpose": keys.Purpose.MASK,
        "session_id": b"bench-session",
        "round_index": 0,
        "client_id": 1,
        "peer_id": 2,
    }
    aead_key = os.urandom(32)
    plaintext = os.urandom(2 * shamir.SHARE_SIZE + 8)
    ad = aead.share_associated_data(session_id=b"bench", round_index=0, sender=1, recipient=2)
    sealed = aead.seal(aead_key, plaintext, associated_data=ad)
    config = fixedpoint.FixedPointConfig.for_bounds(3.0 * 8.0, 10_000)
    values = np.random.default_rng(0).uniform(-24.0, 24.0, MASK_LENGTH)

    assert _naive_combine(shares, 51) == secret  # the baseline is a correct one
    rows: list[tuple[str, str, Callable[[], object], int]] = [
        ("expand 83,850 (AES-256-CTR, privfed)", "prg", lambda: prg.expand(seed, MASK_LENGTH), 20),
        (
            "expand 83,850 (ChaCha20 keystream)",
            "baseline",
            lambda: _chacha20_expand(seed, MASK_LENGTH),
            20,
        ),
        (
            "expand 83,850 (MT19937, insecure)",
            "baseline",
            lambda: _mt19937_expand(seed, MASK_LENGTH),
            20,
        ),
        (
            "expand_mod 83,850 (m = 2**61 - 1)",
            "prg",
            lambda: prg.expand_mod(seed, MASK_LENGTH, modulus=2**61 - 1),
            10,
        ),
        (
            "shamir split 51-of-100",
            "shamir",
            lambda: shamir.split(secret, threshold=51, num_shares=100),
            5,
        ),
        (
            "shamir combine 51 shares",
            "shamir",
            lambda: shamir.combine(shares[:51], threshold=51),
            10,
        ),
        (
            "shamir combine 90 shares (checked)",
            "shamir",
            lambda: shamir.combine(shares[:90], threshold=51),
            5,
        ),
        ("naive Lagrange 51 shares (unchecked)", "baseline", lambda: _naive_combine(shares, 51), 5),
        ("x25519 agree", "keys", lambda: keys.agree(alice.private_key, bob.public_key), 200),
        (
            "x25519 KeyPair.agree (key kept parsed)",
            "keys",
            lambda: alice.agree(bob.public_key),
            200,
        ),
        ("hkdf derive_key", "keys", lambda: keys.derive_key(shared, **context), 500),
        (
            "pairwise_key (agree + hkdf)",
            "keys",
            lambda: keys.pairwise_key(alice.private_key, bob.public_key, **context),
            200,
        ),
        (
            "KeyPair.pairwise_key (agree + hkdf)",
            "keys",
            lambda: alice.pairwise_key(bob.public_key, **context),
            200,
        ),
        (
            "aead seal (272-byte share pair)",
            "aead",
            lambda: aead.seal(aead_key, plaintext, associated_data=ad),
            500,
        ),
        (
            "aead unseal (272-byte share pair)",
            "aead",
            lambda: aead.unseal(aead_key, sealed, associated_data=ad),
            500,
        ),
        ("fixed-point encode 83,850", "fixedpoint", lambda: config.encode(values), 10),
    ]

    results = []
    print(f"{'operation':<42} {'group':<11} {'µs':>12}")
    print("-" * 67)
    for i, (name, group, fn, inner) in enumerate(rows, 1):
        micros = _time(fn, repeats=repeats, inner=max(1, inner // (3 if args.quick else 1)))
        results.append({"operation": name, "group": group, "microseconds": micros})
        print(f"{name:<42} {group:<11} {micros:>12.1f}   [{i}/{len(rows)}]", flush=True)

    curve = []
    for n in range(51, 101, 7):
        micros = _time(
            lambda n=n: shamir.combine(shares[:n], threshold=51), repeats=repeats, inner=3
        )
        curve.append({"shares": n, "microseconds": micros})
    print(
        "\ncombine, threshold 51:",
        ", ".join(f"{c['shares']}: {c['microseconds']:.0f} µs" for c in curve),
    )

    by_name = {r["operation"]: r["microseconds"] for r in results}
    aes = by_name["expand 83,850 (AES-256-CTR, privfed)"]
    chacha = by_name["expand 83,850 (ChaCha20 keystream)"]
    print(f"\nAES-256-CTR / ChaCha20 time ratio for one mask: {aes / chacha:.2f}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "secagg_primitives",
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "quick": args.quick,
        "results": results,
        "combine_curve_threshold_51": curve,
    }
    out = RESULTS / "secagg_primitives.json"
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([c["shares"] for c in curve], [c["microseconds"] / 1e3 for c in curve], marker="o")
    ax.set_xlabel("shares given to combine (threshold 51)")
    ax.set_ylabel("ms per combine")
    ax.set_title("Shamir combine with consistency check")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    png = RESULTS / "secagg_primitives_combine.png"
    fig.savefig(png, dpi=120)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
