"""Shamir secret sharing of 32-byte secrets over the prime field GF(2**521 - 1).

A secret ``s`` (32 bytes, read as a big-endian integer ``< 2**256``) becomes the
constant term of one random polynomial ``f`` of degree ``threshold - 1`` over
GF(p); share ``i`` is the point ``(x_i, f(x_i))``.  Any ``threshold`` shares
determine ``f`` and hence ``s``; any ``threshold - 1`` of them are jointly
uniform and independent of ``s`` (perfect secrecy), because the non-constant
coefficients are drawn uniformly from the OS CSPRNG (:mod:`secrets`).

Why this field: ``p = 2**521 - 1`` is a Mersenne prime (primality proved by
Robinson in 1952 with the Lucas--Lehmer test; it is also the field prime of the
NIST P-521 curve), so the provenance is beyond doubt, and ``p > 2**256`` lets a
whole 32-byte secret live in a single field element -- one polynomial per
secret, no splitting into chunks.

Integrity: a share carries no MAC.  :func:`combine` therefore uses any
redundancy it is given: with more than ``threshold`` shares it checks that all of
them lie on one polynomial of degree ``threshold - 1`` and raises
:class:`~privfed.errors.ReconstructionError` otherwise, so a tampered or
mixed-up share is detected instead of yielding a wrong secret.  With exactly
``threshold`` shares nothing can be detected except a result that does not fit
in 32 bytes.  That check catches *random* errors (a corrupted share makes the
result a near-uniform field element, which fits in 32 bytes with probability
about ``2**-265``); it is no defence against a *chosen* error: whoever alters a
share on purpose can shift the secret by any amount that keeps it below
``2**256``, undetected.  Callers that face an adversary must verify the rebuilt
secret against a commitment, as the protocol layer does (self-mask
commitments, mask public keys, noise-seed commitments).

This module is part of the hazardous-materials layer: it does not authenticate
shares or bind them to a session.  Use :mod:`privfed.secagg.protocol`, which
does.
"""

from __future__ import annotations

import functools
import math
import operator
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from privfed._checks import check_bytes, check_int
from privfed.errors import ParameterError, ParameterTypeError, ReconstructionError

__all__ = [
    "FIELD_BYTES",
    "PRIME",
    "SECRET_SIZE",
    "SHARE_SIZE",
    "Share",
    "combine",
    "combine_batches",
    "combine_many",
    "split",
    "split_many",
]

#: The field prime: the Mersenne prime ``2**521 - 1`` (proved prime by Lucas--Lehmer).
PRIME: Final[int] = 2**521 - 1

#: Width in bytes of one field element in the serialized form (``ceil(521 / 8)``).
FIELD_BYTES: Final[int] = (PRIME.bit_length() + 7) // 8

#: Size in bytes of a secret that :func:`split` accepts and :func:`combine` returns.
SECRET_SIZE: Final[int] = 32

#: Size in bytes of :meth:`Share.to_bytes`: big-endian index, then big-endian value.
SHARE_SIZE: Final[int] = 2 * FIELD_BYTES

_SECRET_LIMIT: Final[int] = 1 << (8 * SECRET_SIZE)


@dataclass(frozen=True)
class Share:
    """One point ``(index, value)`` of a sharing polynomial.

    Attributes:
        index: The x-coordinate, an ``int`` in ``[1, PRIME)``; never 0, since
            ``f(0)`` is the secret.  Not secret.
        value: The y-coordinate, an ``int`` in ``[0, PRIME)``.  Secret: it is
            left out of ``repr`` and out of every error message.

    Raises:
        ParameterTypeError: ``index`` or ``value`` is not an ``int``.
        ParameterError: ``index`` or ``value`` lies outside its range.
    """

    index: int
    value: int = field(repr=False)

    def __post_init__(self) -> None:
        check_int("index", self.index, minimum=1, maximum=PRIME - 1)
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ParameterTypeError("value", "an int", self.value)
        if not 0 <= self.value < PRIME:
            raise ParameterError("value", "an int in [0, PRIME)", None, secret=True)

    def to_bytes(self) -> bytes:
        """Serialize to exactly :data:`SHARE_SIZE` bytes.

        Returns:
            ``index`` then ``value``, each as a big-endian unsigned integer of
            :data:`FIELD_BYTES` bytes.
        """
        return self.index.to_bytes(FIELD_BYTES, "big") + self.value.to_bytes(FIELD_BYTES, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> Share:
        """Parse the output of :meth:`to_bytes`, strictly.

        Args:
            data: Exactly :data:`SHARE_SIZE` bytes.

        Returns:
            The share.

        Raises:
            ParameterTypeError: ``data`` is not bytes-like.
            ParameterError: Wrong length, an index of 0 or ``>= PRIME``, or a value
                ``>= PRIME`` (non-canonical encodings are refused).
        """
        raw = check_bytes("data", data, size=SHARE_SIZE)
        index = int.from_bytes(raw[:FIELD_BYTES], "big")
        value = int.from_bytes(raw[FIELD_BYTES:], "big")
        if not 1 <= index < PRIME:
            raise ParameterError("data", "a serialized share whose index lies in [1, PRIME)", index)
        if value >= PRIME:
            raise ParameterError(
                "data", "a serialized share whose value lies in [0, PRIME)", None, secret=True
            )
        return cls(index, value)


# Reduce the Horner accumulator modulo PRIME only once it exceeds this many bits.
_LAZY_REDUCTION_BITS: Final[int] = 2048


def _check_threshold(threshold: object) -> int:
    return check_int("threshold", threshold, minimum=2)


def split(
    secret: bytes,
    *,
    threshold: int,
    num_shares: int,
    indices: Sequence[int] | None = None,
) -> list[Share]:
    """Split a 32-byte secret into ``num_shares`` shares, any ``threshold`` of which recover it.

    Threat model: an adversary holding at most ``threshold - 1`` shares learns
    nothing about ``secret`` (information-theoretically), provided the OS CSPRNG
    is sound.  Shares are not authenticated; see :func:`combine`.

    Args:
        secret: Exactly :data:`SECRET_SIZE` bytes (any value).
        threshold: Number of shares needed to reconstruct, in ``[2, num_shares]``.
        num_shares: Number of shares to produce, ``>= 2``.
        indices: Optional x-coordinates, one per share: distinct ``int`` values in
            ``[1, PRIME)``.  The protocol passes client-derived indices here.
            Default ``1, 2, ..., num_shares``.

    Returns:
        ``num_shares`` shares, in the order of ``indices``.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: Wrong secret length, ``threshold`` outside
            ``[2, num_shares]``, or ``indices`` of the wrong length, with a
            duplicate or with an element outside ``[1, PRIME)``.
    """
    data = check_bytes("secret", secret, size=SECRET_SIZE)
    check_int("num_shares", num_shares, minimum=2)
    threshold = _check_threshold(threshold)
    if threshold > num_shares:
        raise ParameterError("threshold", f"an int in [2, num_shares={num_shares}]", threshold)
    if indices is None:
        xs = list(range(1, num_shares + 1))
    else:
        if isinstance(indices, str | bytes) or not isinstance(indices, Sequence):
            raise ParameterTypeError("indices", "a sequence of ints", indices)
        if len(indices) != num_shares:
            raise ParameterError(
                "indices", f"a sequence of length num_shares={num_shares}", len(indices)
            )
        xs = [check_int("indices", x, minimum=1, maximum=PRIME - 1) for x in indices]
        if len(set(xs)) != len(xs):
            raise ParameterError("indices", "distinct x-coordinates", _first_duplicate(xs))

    coefficients = [int.from_bytes(data, "big")]
    coefficients += [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    top = coefficients[::-1]
    # Horner's rule with lazy reduction.  Multiplying by a small x is cheap, and
    # reducing only when the accumulator has grown well past the field size
    # saves most of the (expensive) big-integer divisions; the result is the
    # same field element.  Starting below 2**PRIME_BITS, each step
    # ``acc * x + c`` adds at most ``x.bit_length() + 1`` bits, so ``run``
    # steps fit below 2**_LAZY_REDUCTION_BITS between reductions.
    width = max(xs).bit_length() + 1
    run = max(1, (_LAZY_REDUCTION_BITS - PRIME.bit_length()) // width)
    chunks = [top[i : i + run] for i in range(0, len(top), run)]
    new, setattr_ = object.__new__, object.__setattr__
    shares = []
    for x in xs:
        acc = 0
        for chunk in chunks:
            for c in chunk:
                acc = acc * x + c
            acc %= PRIME
        # ``x`` was validated above and ``acc`` is reduced: skip Share's checks.
        share = new(Share)
        setattr_(share, "index", x)
        setattr_(share, "value", acc)
        shares.append(share)
    return shares


# Lanes of split_many wider than this fall back to one split per
# secret (its Horner loop reduces modulo the prime as it goes; unreduced lanes of
# very high thresholds would cost more than they save).
_MAX_LANE_BITS = 4096
_COEFFICIENT_BYTES = (PRIME.bit_length() + 7) // 8
_COEFFICIENT_SHIFT = 8 * _COEFFICIENT_BYTES - PRIME.bit_length()


def _random_coefficients(count: int) -> list[int]:
    """``count`` independent, exactly uniform elements of ``[0, PRIME)``.

    One CSPRNG read for all of them; each is the top 521 bits of 66 random bytes
    (uniform on ``[0, 2**521)``), redrawn in the one case ``2**521 - 1 = PRIME``,
    so exactly uniform below the prime -- the rejection rule of
    :func:`secrets.randbelow` (which :func:`split` uses), read in bulk.
    """
    raw = secrets.token_bytes(_COEFFICIENT_BYTES * count)
    prime, size, shift = PRIME, _COEFFICIENT_BYTES, _COEFFICIENT_SHIFT
    out = [int.from_bytes(raw[i : i + size], "big") >> shift for i in range(0, len(raw), size)]
    for i, value in enumerate(out):
        while value >= prime:  # probability 2**-521 per coefficient
            value = secrets.randbelow(prime)
        out[i] = value
    return out


def split_many(
    values: Sequence[bytes], *, threshold: int, holders: Sequence[int]
) -> list[list[bytes]]:
    """Shamir-share several 32-byte secrets among the same holders: :func:`split`, batched.

    The shares come serialized (:meth:`Share.to_bytes`):
    ``out[k][i]`` is ``Share(holders[i], f_k(holders[i])).to_bytes()``
    for an independent random polynomial ``f_k`` of degree ``threshold - 1``
    with ``f_k(0) = values[k]`` over GF(:data:`PRIME`) -- the same
    sharing, share for share, as :func:`split` of each secret with
    ``indices=holders`` draws (the tests check equality for equal
    coefficients).

    Faster than one :func:`split` per secret because the secrets are
    evaluated together: the polynomials' coefficients are packed side by side
    into one integer, in lanes wide enough that no lane ever carries into the
    next (every coefficient is below the prime and Horner's rule only
    multiplies by the non-negative holder id and adds), so one Horner pass
    evaluates every polynomial at once; each lane is reduced once at the end.

    Args:
        values: The secrets, each :data:`SECRET_SIZE` bytes.
        threshold: In ``[2, len(holders)]``.
        holders: Distinct client ids in ``[1, 2**32)``, the x-coordinates.

    Returns:
        For each secret, one serialized share per holder, in holder order.
    """
    xs = list(holders)
    # Exact ints only (split refuses bool and numpy integers), in split's domain.
    plain = (
        type(threshold) is not int
        or any(type(x) is not int for x in xs)
        or not 2 <= threshold <= len(xs)
        or min(xs) < 1
        or max(xs) >= PRIME
        or len(set(xs)) != len(xs)
        or any(type(v) is not bytes or len(v) != SECRET_SIZE for v in values)
    )
    # A lane holds f(x) <= (PRIME - 1) * threshold * x**(threshold - 1) unreduced
    # (x >= 1), which is below 2**(width - 1).
    width = (
        0
        if plain
        else PRIME.bit_length()
        + (threshold - 1) * max(xs).bit_length()
        + threshold.bit_length()
        + 1
    )
    if plain or width > _MAX_LANE_BITS:
        # Also where an argument is off its domain: split raises the typed error.
        return [
            [
                share.to_bytes()
                for share in split(v, threshold=threshold, num_shares=len(xs), indices=xs)
            ]
            for v in values
        ]
    drawn = _random_coefficients((threshold - 1) * len(values))
    # packed[j] = sum_k c_{k,j} << (width * k); c_{k,0} is secret k.
    rows = [
        [int.from_bytes(v, "big"), *drawn[k * (threshold - 1) : (k + 1) * (threshold - 1)]]
        for k, v in enumerate(values)
    ]
    top = [
        sum(row[j] << (width * k) for k, row in enumerate(rows))
        for j in range(threshold - 1, -1, -1)
    ]
    prime, lane, size = PRIME, (1 << width) - 1, FIELD_BYTES
    shifts = [width * k for k in range(len(values))]
    out: list[list[bytes]] = [[] for _ in values]
    for x in xs:
        acc = 0
        for c in top:
            acc = acc * x + c
        index = x.to_bytes(size, "big")
        for k, shift in enumerate(shifts):
            out[k].append(index + (((acc >> shift) & lane) % prime).to_bytes(size, "big"))
    return out


def _first_duplicate(xs: Sequence[int]) -> int:
    seen: set[int] = set()
    for x in xs:
        if x in seen:
            return x
        seen.add(x)
    raise AssertionError("no duplicate")  # pragma: no cover - callers check first


# PRIME = 2**521 - 1 is a Mersenne prime: ``x mod PRIME`` for ``0 <= x < 2**1042``
# (a product of two field elements) is two folds ``(x & PRIME) + (x >> 521)`` and
# one conditional subtraction -- shifts and masks instead of a long division,
# about twice as fast in CPython.  Only public values pass through these paths
# or secret ones whose timing is not observable beyond what the server already
# learns (see the module docstring: this layer is not constant-time).
_PRIME_BITS: Final[int] = PRIME.bit_length()


def _mulmod(a: int, b: int) -> int:
    """``a * b % PRIME`` for ``0 <= a, b < 2**521``."""
    x = a * b
    x = (x & PRIME) + (x >> _PRIME_BITS)
    x = (x & PRIME) + (x >> _PRIME_BITS)
    return x - PRIME if x >= PRIME else x


def _batch_inverse(values: list[int]) -> list[int]:
    """Invert non-zero field elements with one exponentiation (Montgomery's trick)."""
    prefix = [1] * (len(values) + 1)
    acc = 1
    mulmod = _mulmod
    for i, v in enumerate(values):
        acc = mulmod(acc, v)
        prefix[i + 1] = acc
    inv = pow(acc, -1, PRIME)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = mulmod(inv, prefix[i])
        inv = mulmod(inv, values[i])
    return out


# Interpolation works on plain Python ints.  When the indices are small (the
# protocol's client ids), a product of threshold - 1 index differences is no
# longer than PRIME itself, so reducing it modulo PRIME at every step would cost
# more than it saves; otherwise every step is reduced.  Either way the result is
# the same field element.


def _product(values: list[int], *, reduce: bool) -> int:
    if not reduce:
        return math.prod(values) % PRIME
    acc = 1
    for v in values:
        acc = acc * v % PRIME
    return acc


def _leave_one_out_products(values: list[int], *, reduce: bool) -> list[int]:
    """``out[i] = prod(values[m] for m != i)`` (congruent mod PRIME), without inversion."""
    n = len(values)
    out = [1] * n
    acc = 1
    for i in range(n):
        out[i] = acc
        acc = acc * values[i]
        if reduce:
            acc %= PRIME
    acc = 1
    for i in range(n - 1, -1, -1):
        out[i] = out[i] * acc
        acc = acc * values[i]
        if reduce:
            out[i] %= PRIME
            acc %= PRIME
    return out


# The x-coordinates are public (client indices), and a server reconstructs many
# secrets from shares held by the same set of clients; the Lagrange quantities
# that depend on the x-coordinates alone are therefore cached.  Only public
# values enter these caches -- never a share value or a secret.


def _denominators(xs: tuple[int, ...], reduce: bool) -> list[int]:
    """``prod_{m != i} (x_i - x_m)`` for every ``i`` (non-zero: distinct x)."""
    return [
        _product([xi - xm for m, xm in enumerate(xs) if m != i], reduce=reduce)
        for i, xi in enumerate(xs)
    ]


@functools.lru_cache(maxsize=128)
def _denominator_inverses(xs: tuple[int, ...], reduce: bool) -> tuple[int, ...]:
    """``1 / prod_{m != i} (x_i - x_m)`` for every ``i``."""
    return tuple(_batch_inverse(_denominators(xs, reduce)))


@functools.lru_cache(maxsize=1024)
def _basis_at(xs: tuple[int, ...], point: int, reduce: bool) -> tuple[int, ...]:
    """``prod_{m != i} (point - x_m)`` for every ``i``."""
    return tuple(_leave_one_out_products([point - xm for xm in xs], reduce=reduce))


def combine(shares: Sequence[Share], *, threshold: int) -> bytes:
    """Reconstruct the secret from at least ``threshold`` shares, checking redundancy.

    The polynomial is interpolated (Lagrange form, with a single modular inversion
    via Montgomery's trick) from the first ``threshold`` shares; every further
    share is then checked to lie on it.  Cost: O(threshold * len(shares))
    multiplications (a 51-of-90 combine takes a few milliseconds).

    Threat model: the shares may have been altered by whoever relayed them.  With
    ``k > threshold`` shares, any set of up to ``k - threshold`` altered shares is
    detected (the altered points cannot all lie on the degree-``threshold - 1``
    polynomial through the honest ones).  With exactly ``threshold`` shares,
    alteration is undetectable in general; the only check left is that the
    result fits in :data:`SECRET_SIZE` bytes.

    Args:
        shares: At least ``threshold`` :class:`Share` objects with distinct indices.
        threshold: The threshold the secret was split with, ``>= 2``.

    Returns:
        The :data:`SECRET_SIZE`-byte secret.

    Raises:
        ParameterTypeError: ``shares`` is not a sequence of :class:`Share`, or
            ``threshold`` is not an ``int``.
        ParameterError: Fewer than ``threshold`` shares, or two shares with the
            same index (separate messages).
        ReconstructionError: The shares do not lie on one polynomial of degree
            ``threshold - 1``, or the reconstructed value does not fit in
            :data:`SECRET_SIZE` bytes.
    """
    threshold = _check_threshold(threshold)
    xs, reduce = _plan(shares, threshold, "shares")
    return _interpolate(shares, threshold, xs, reduce, _denominator_inverses(xs, reduce))


def combine_many(groups: Sequence[Sequence[Share]], *, threshold: int) -> list[bytes]:
    """Reconstruct many secrets: ``[combine(g, threshold=threshold) for g in groups]``.

    The same checks and results as :func:`combine` for every group, but the
    field inversions of all groups are done together (Montgomery's trick across
    groups), so a server rebuilding secrets held by many different sets of
    clients -- one per neighbourhood in SecAgg+ -- pays for one modular
    inversion in total instead of one per secret.  Groups are validated before
    any is interpolated.

    Args:
        groups: Sequences of shares, each as :func:`combine` accepts them.
        threshold: The threshold every secret was split with, ``>= 2``.

    Returns:
        The secrets, in the order of ``groups``.

    Raises:
        ParameterTypeError: ``groups`` is not a sequence of share sequences, or
            a group holds something other than :class:`Share`.
        ParameterError: A group has fewer than ``threshold`` shares or a
            duplicate index (the message names the group's position).
        ReconstructionError: As :func:`combine`, for the first group that
            fails; the message starts with the group's position.
    """
    threshold = _check_threshold(threshold)
    if isinstance(groups, str | bytes) or not isinstance(groups, Sequence):
        raise ParameterTypeError("groups", "a sequence of share sequences", groups)
    plans = [_plan(group, threshold, f"groups[{i}]") for i, group in enumerate(groups)]
    distinct = list(dict.fromkeys(plans))
    denominators = [_denominators(xs, reduce) for xs, reduce in distinct]
    flat = _batch_inverse([d for ds in denominators for d in ds])
    inverses: dict[tuple[tuple[int, ...], bool], tuple[int, ...]] = {}
    offset = 0
    for key, ds in zip(distinct, denominators, strict=True):
        inverses[key] = tuple(flat[offset : offset + len(ds)])
        offset += len(ds)
    secrets_out = []
    for i, (group, key) in enumerate(zip(groups, plans, strict=True)):
        try:
            secrets_out.append(_interpolate(group, threshold, key[0], key[1], inverses[key]))
        except ReconstructionError as exc:
            raise ReconstructionError(f"groups[{i}]: {exc}") from None
    return secrets_out


# Lagrange weights at 0, per tuple of x-coordinates (public values only).  Bounded:
# a SecAgg+ server at N = 1,000 needs about one tuple per client and round.
_ZERO_WEIGHTS: dict[tuple[int, ...], tuple[int, ...]] = {}
_ZERO_WEIGHTS_LIMIT: Final[int] = 1 << 14


def _zero_weights(distinct: list[tuple[int, ...]], threshold: int) -> list[tuple[int, ...]]:
    """``w_i = prod_{m != i} x_m / (x_m - x_i)`` for each tuple: ``f(0) = sum_i w_i f(x_i)``.

    The denominators of all tuples are inverted together (Montgomery's trick).
    """
    # Looked up before anything is added: a full cache is cleared below, which
    # must not lose the weights of the tuples found in it.
    found = {xs: _ZERO_WEIGHTS[xs] for xs in distinct if xs in _ZERO_WEIGHTS}
    missing = [xs for xs in distinct if xs not in found]
    if missing:
        sign = -1 if threshold % 2 == 0 else 1  # (-1)**(t - 1)
        numerators: list[int] = []
        for xs in missing:
            # prod_{m != i} (0 - x_m) = (-1)**(t-1) * prod(xs) / x_i, exactly.
            whole = math.prod(xs)
            numerators += [sign * (whole // x) % PRIME for x in xs]
        denominators = _zero_denominators(missing, threshold)
        weights = list(map(_mulmod, numerators, _batch_inverse(denominators)))
        if len(_ZERO_WEIGHTS) + len(missing) > _ZERO_WEIGHTS_LIMIT:
            _ZERO_WEIGHTS.clear()
        for g, xs in enumerate(missing):
            found[xs] = _ZERO_WEIGHTS[xs] = tuple(weights[g * threshold : (g + 1) * threshold])
    return [found[xs] for xs in distinct]


# Tuples per block of :func:`_zero_denominators` (a block's differences: at most a
# few MiB of int64 for the thresholds a round uses).
_DIFFERENCE_BLOCK: Final[int] = 256


def _zero_denominators(missing: list[tuple[int, ...]], threshold: int) -> list[int]:
    """``prod_{m != i} (x_i - x_m) % PRIME`` for each tuple and each ``i``, flattened.

    The products are exact.  With indices below ``2**31`` (client ids of any
    realistic round), the differences are multiplied ``63 // bits`` at a time
    in int64 (``|x_i - x_m| < 2**bits`` for ``bits`` the largest index's bit
    length, so no partial product reaches ``2**63``), which leaves Python a
    few big-int products per ``i`` instead of ``t - 1``.
    """
    bits = max(max(xs) for xs in missing).bit_length()
    per = 63 // bits
    if per < 2:
        out: list[int] = []
        for xs in missing:
            for i, xi in enumerate(xs):
                row = [xi - xm for xm in xs]
                row[i] = 1
                out.append(math.prod(row) % PRIME)
        return out
    t = threshold
    width = -(-t // per) * per  # the differences of one i, padded with ones
    out = []
    diagonal = np.arange(t)
    for start in range(0, len(missing), _DIFFERENCE_BLOCK):
        block = np.array(missing[start : start + _DIFFERENCE_BLOCK], dtype=np.int64)
        g = block.shape[0]
        rows = np.ones((g, t, width), dtype=np.int64)
        rows[:, :, :t] = block[:, :, None] - block[:, None, :]
        rows[:, diagonal, diagonal] = 1
        # One flat list of ints (no list per row: nothing for the garbage
        # collector to track), then one big-int product per i.
        chunks = width // per
        flat = rows.reshape(g * t * chunks, per).prod(axis=1).tolist()
        out += [math.prod(flat[j : j + chunks]) % PRIME for j in range(0, len(flat), chunks)]
    return out


def _is_sequence(value: object) -> bool:
    """A non-string sequence (lists and tuples without the slower ABC check)."""
    kind = type(value)
    if kind is list or kind is tuple:
        return True
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def combine_batches(
    batches: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], *, threshold: int
) -> list[list[bytes]]:
    """Reconstruct many secrets from exactly ``threshold`` shares each, grouped by share indices.

    Each batch is ``(xs, rows)``: ``threshold`` distinct share indices and,
    per secret, the share values at those indices (``rows[j][i]`` is the value
    of the share with index ``xs[i]``).  The result is exactly
    ``[[combine([Share(x, y) for x, y in zip(xs, row)], threshold=threshold)
    for row in rows] for xs, rows in batches]`` -- the same secrets and the
    same checks (with exactly ``threshold`` shares only the 32-byte range can
    be checked, see :func:`combine`) -- but the Lagrange weights at 0 depend on
    ``xs`` alone: they are computed once per distinct ``xs`` (their field
    inversions batched across all batches) and every secret is then one dot
    product.  A server rebuilding the secrets of many clients from the shares
    of the same responders uses this.

    Args:
        batches: ``(xs, rows)`` pairs as above; ``xs`` ints in
            ``[1, PRIME)``, distinct, exactly ``threshold`` of them; each row
            exactly ``threshold`` ints in ``[0, PRIME)``.
        threshold: The threshold every secret was split with, ``>= 2``.

    Returns:
        Per batch, the secrets of its rows, in order.

    Raises:
        ParameterTypeError: An argument or item has the wrong type.
        ParameterError: An ``xs`` or row of the wrong length, a duplicate or
            out-of-range index, or a value outside ``[0, PRIME)`` (the message
            names the batch, never a value).
        ReconstructionError: A rebuilt value does not fit in
            :data:`SECRET_SIZE` bytes; the message starts with the batch and row.
    """
    threshold = _check_threshold(threshold)
    if not _is_sequence(batches):
        raise ParameterTypeError("batches", "a sequence of (xs, rows) pairs", batches)
    keys: list[tuple[int, ...]] = []
    for i, batch in enumerate(batches):
        if not isinstance(batch, tuple) or len(batch) != 2:
            raise ParameterTypeError(f"batches[{i}]", "an (xs, rows) pair", batch)
        xs, rows = batch
        name = f"batches[{i}]"
        if not _is_sequence(xs):
            raise ParameterTypeError(name, "a sequence of share indices", xs)
        if len(xs) != threshold:
            raise ParameterError(name, f"exactly threshold={threshold} share indices", len(xs))
        key = tuple(xs)
        if not all(type(x) is int and 0 < x < PRIME for x in key):
            key = tuple(check_int(name, x, minimum=1, maximum=PRIME - 1) for x in xs)
        if len(set(key)) != threshold:
            raise ParameterError(name, "distinct share indices", _first_duplicate(key))
        if not _is_sequence(rows):
            raise ParameterTypeError(name, "a sequence of rows of share values", rows)
        for row in rows:
            if not _is_sequence(row):
                raise ParameterTypeError(name, "a sequence of rows of share values", row)
            if len(row) != threshold:
                raise ParameterError(name, f"rows of threshold={threshold} values", len(row))
            if all(type(y) is int and 0 <= y < PRIME for y in row):
                continue
            for y in row:
                if type(y) is not int:
                    raise ParameterTypeError(name, "share values of type int", y)
                if not 0 <= y < PRIME:
                    raise ParameterError(name, "share values in [0, PRIME)", None, secret=True)
        keys.append(key)
    distinct = list(dict.fromkeys(keys))
    weights = dict(zip(distinct, _zero_weights(distinct, threshold), strict=True))
    out: list[list[bytes]] = []
    for i, (key, (_, rows)) in enumerate(zip(keys, batches, strict=True)):
        w = weights[key]
        secrets_out = []
        for j, row in enumerate(rows):
            value = sum(map(operator.mul, row, w))
            while value >> _PRIME_BITS:
                value = (value & PRIME) + (value >> _PRIME_BITS)
            if value == PRIME:
                value = 0
            if value >= _SECRET_LIMIT:
                raise ReconstructionError(
                    f"batches[{i}] row {j}: reconstructed value does not fit in {SECRET_SIZE} "
                    "bytes: wrong threshold, shares from different secrets, or altered shares"
                )
            secrets_out.append(value.to_bytes(SECRET_SIZE, "big"))
        out.append(secrets_out)
    return out


def _plan(shares: object, threshold: int, name: str) -> tuple[tuple[int, ...], bool]:
    """Validate one group of shares; return its interpolation x-coordinates and mode."""
    if isinstance(shares, str | bytes) or not isinstance(shares, Sequence):
        raise ParameterTypeError(name, "a sequence of Share", shares)
    for s in shares:
        if not isinstance(s, Share):
            raise ParameterTypeError(name, "a sequence of Share", s)
    if len(shares) < threshold:
        raise ParameterError(
            name,
            f"at least threshold={threshold} shares",
            len(shares),
            detail="too few shares to reconstruct",
        )
    all_x = [s.index for s in shares]
    if len(set(all_x)) != len(all_x):
        raise ParameterError(
            name,
            "shares with distinct indices",
            _first_duplicate(all_x),
            detail="duplicate share index",
        )
    reduce = max(all_x).bit_length() * threshold > PRIME.bit_length()
    return tuple(all_x[:threshold]), reduce


def _interpolate(
    shares: Sequence[Share],
    threshold: int,
    xs: tuple[int, ...],
    reduce: bool,
    inverses: tuple[int, ...],
) -> bytes:
    """Interpolate through the first ``threshold`` shares and check the others."""
    ys = [s.value for s in shares[:threshold]]
    weights = [y * w % PRIME for y, w in zip(ys, inverses, strict=True)]

    def evaluate(point: int) -> int:
        # Lagrange form: f(point) = sum_i c_i * prod_{m != i} (point - x_m).
        basis = _basis_at(xs, point, reduce)
        return sum(c * b for c, b in zip(weights, basis, strict=True)) % PRIME

    secret_int = evaluate(0)
    for extra in shares[threshold:]:
        if evaluate(extra.index) != extra.value:
            raise ReconstructionError(
                "shares are inconsistent: they do not lie on one polynomial of "
                f"degree threshold-1={threshold - 1}"
            )
    if secret_int >= _SECRET_LIMIT:
        raise ReconstructionError(
            f"reconstructed value does not fit in {SECRET_SIZE} bytes: wrong threshold, "
            "shares from different secrets, or altered shares"
        )
    return secret_int.to_bytes(SECRET_SIZE, "big")
