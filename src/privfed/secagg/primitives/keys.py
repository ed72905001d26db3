"""X25519 key agreement and HKDF-SHA256 key derivation with explicit domain separation.

Each client of a secure-aggregation round holds X25519 key pairs (RFC 7748).
Two clients ``u`` and ``v`` compute the same raw shared secret with
:func:`agree`; :func:`derive_key` turns it into a key for one purpose, bound to
the session, the round and the unordered pair ``{u, v}``.  Binding every key to
its context means a key can never serve two purposes or two rounds, even when
the same X25519 key pair is reused.

Derivation (HKDF-SHA256, RFC 5869):

* salt: the fixed, public string :data:`HKDF_SALT`.  RFC 5869 §3.1 permits a
  constant, non-secret salt; HKDF-Extract turns the (non-uniform) X25519 output
  into a pseudorandom key, and all context goes into ``info``;
* info: a versioned encoding of the context --
  ``version byte (KDF_VERSION) || lp(b"privfed.secagg") || lp(purpose) ||
  lp(session_id) ||
  u64(round_index) || u8(n_ids) || u32(id)...`` where ``lp(x)`` is a 2-byte
  big-endian length followed by ``x``.  Every field has either a fixed width or
  a length prefix, so two different contexts never encode to the same bytes.
  Pairwise keys carry ``(min(client_id, peer_id), max(client_id, peer_id))`` so
  both ends derive the same key; the self-mask seed carries the one client id.

This module is part of the hazardous-materials layer: callers must still
authenticate public keys (the protocol layer does) -- X25519 alone does not stop
a man in the middle.
"""

from __future__ import annotations

import enum
import hmac
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfed._checks import check_bytes, check_int
from privfed.errors import KeyAgreementError, ParameterError, ParameterTypeError

__all__ = [
    "HKDF_SALT",
    "KDF_VERSION",
    "MAX_CLIENT_ID",
    "MAX_DERIVED_KEY_SIZE",
    "MAX_SESSION_ID_SIZE",
    "MIN_DERIVED_KEY_SIZE",
    "PRIVATE_KEY_SIZE",
    "PUBLIC_KEY_SIZE",
    "SHARED_SECRET_SIZE",
    "KeyPair",
    "Purpose",
    "agree",
    "derive_key",
    "derive_self_mask_seed",
    "is_low_order",
    "pairwise_key",
]

#: Size in bytes of an X25519 public key (a little-endian u-coordinate).
PUBLIC_KEY_SIZE: Final[int] = 32
#: Size in bytes of an X25519 private key (a scalar, clamped when used).
PRIVATE_KEY_SIZE: Final[int] = 32
#: Size in bytes of the raw X25519 shared secret.
SHARED_SECRET_SIZE: Final[int] = 32
#: Version of the HKDF ``info`` encoding; bumped whenever the encoding changes.
KDF_VERSION: Final[int] = 1
#: The fixed public HKDF salt.
HKDF_SALT: Final[bytes] = b"privfed/secagg/hkdf-salt/v1"
#: Client ids are integers in ``[0, MAX_CLIENT_ID]`` (encoded as u32).
MAX_CLIENT_ID: Final[int] = 2**32 - 1
#: Largest session id in bytes (session ids have 1 to 64 bytes).
MAX_SESSION_ID_SIZE: Final[int] = 64
#: Smallest derived key length accepted (128-bit security floor).
MIN_DERIVED_KEY_SIZE: Final[int] = 16
#: Largest HKDF-SHA256 output (255 blocks of 32 bytes).
MAX_DERIVED_KEY_SIZE: Final[int] = 255 * 32

_LABEL: Final[bytes] = b"privfed.secagg"
_MAX_ROUND: Final[int] = 2**64 - 1


class Purpose(enum.Enum):
    """What a derived key is for; part of the HKDF context (domain separation)."""

    #: Seed ``s_uv`` of the pairwise mask between clients ``u`` and ``v``.
    MASK = "mask"
    #: AEAD key for the Shamir shares that ``u`` sends ``v`` through the server.
    SHARE_ENCRYPTION = "share-encryption"
    #: Expansion of a client's secret self-mask seed ``b_u``.
    SELF_MASK = "self-mask"


@dataclass(frozen=True)
class KeyPair:
    """An X25519 key pair.

    The pair keeps the parsed private key, so :meth:`agree` and
    :meth:`pairwise_key` cost about half as much as the module-level functions
    of the same names, which must parse the private key on every call (OpenSSL
    recomputes the public key when loading a private key).

    Attributes:
        private_key: The 32-byte private scalar (secret; not shown in ``repr``).
        public_key: The 32-byte public key ``X25519(private_key, 9)``.

    Raises:
        ParameterTypeError: A key is not bytes.
        ParameterError: A key has the wrong length, or ``public_key`` does not
            belong to ``private_key``.
    """

    private_key: bytes = field(repr=False)
    public_key: bytes
    _key: X25519PrivateKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        private = check_bytes("private_key", self.private_key, size=PRIVATE_KEY_SIZE)
        public = check_bytes("public_key", self.public_key, size=PUBLIC_KEY_SIZE)
        key = X25519PrivateKey.from_private_bytes(private)
        if not hmac.compare_digest(key.public_key().public_bytes_raw(), public):
            raise ParameterError(
                "public_key",
                "the X25519 public key of private_key",
                None,
                secret=True,
            )
        # Normalise bytearray/memoryview input to immutable bytes.
        object.__setattr__(self, "private_key", private)
        object.__setattr__(self, "public_key", public)
        object.__setattr__(self, "_key", key)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # The parsed OpenSSL key cannot be pickled or copied; rebuild it instead.
        return (KeyPair.from_private_bytes, (self.private_key,))

    @classmethod
    def generate(cls) -> KeyPair:
        """Draw a fresh key pair from the OS CSPRNG."""
        key = X25519PrivateKey.generate()
        return cls(key.private_bytes_raw(), key.public_key().public_bytes_raw())

    @classmethod
    def from_private_bytes(cls, private_key: bytes) -> KeyPair:
        """Rebuild a key pair from its 32-byte private key.

        Raises:
            ParameterTypeError: ``private_key`` is not bytes.
            ParameterError: ``private_key`` is not 32 bytes long.
        """
        private = check_bytes("private_key", private_key, size=PRIVATE_KEY_SIZE)
        return cls(private, _public_from_private(private))

    def agree(self, peer_public_key: bytes) -> bytes:
        """Equivalent to ``agree(self.private_key, peer_public_key)``, but faster.

        See the module-level :func:`agree` for the threat model and errors.
        """
        public = check_bytes("peer_public_key", peer_public_key, size=PUBLIC_KEY_SIZE)
        return _exchange(self._key, public)

    def pairwise_key(
        self,
        peer_public_key: bytes,
        *,
        purpose: Purpose,
        session_id: bytes,
        round_index: int,
        client_id: int,
        peer_id: int,
        length: int = 32,
    ) -> bytes:
        """Equivalent to ``pairwise_key(self.private_key, peer_public_key, ...)``, but faster.

        See the module-level :func:`pairwise_key` for the arguments and errors;
        the context is validated before the X25519 operation.
        """
        info, size = _pair_context(purpose, session_id, round_index, client_id, peer_id, length)
        return _hkdf_sha256(self.agree(peer_public_key), salt=HKDF_SALT, info=info, length=size)

    def pairwise_keys(
        self,
        peer_public_keys: Mapping[int, bytes],
        *,
        purpose: Purpose,
        session_id: bytes,
        round_index: int,
        client_id: int,
        length: int = 32,
    ) -> dict[int, bytes]:
        """:meth:`pairwise_key` for many peers at once.

        Returns exactly ``{peer_id: self.pairwise_key(public, peer_id=peer_id,
        ...)}`` for every item of ``peer_public_keys``, but validates and
        encodes the shared part of the context once instead of once per peer.
        Every argument (each peer id and key included) is validated before the
        first X25519 operation.

        Args:
            peer_public_keys: ``{peer_id: peer_public_key}``; each id an ``int``
                in ``[0, 2**32)`` other than ``client_id``, each key 32 bytes.
            purpose, session_id, round_index, client_id, length: As for
                :meth:`pairwise_key`.

        Returns:
            ``{peer_id: key}`` in the iteration order of ``peer_public_keys``.

        Raises:
            ParameterTypeError: An argument has the wrong type.
            ParameterError: An argument is outside its domain.
            KeyAgreementError: A peer's key is a low-order point; the error's
                ``peer_id`` names that peer (no key material is included).
        """
        if not isinstance(peer_public_keys, Mapping):
            raise ParameterTypeError(
                "peer_public_keys", "a mapping from peer id to public key", peer_public_keys
            )
        prefix, me, size = _pair_prefix(purpose, session_id, round_index, client_id, length)
        jobs: list[tuple[int, bytes, bytes]] = []
        for peer, public in peer_public_keys.items():
            # Fast path for the common, valid case (an exact int in range and
            # exact 32 bytes); anything else takes the full checks, which accept
            # and refuse exactly as before.
            if type(peer) is int and 0 <= peer <= MAX_CLIENT_ID and peer != me:
                b = peer
            else:
                b = _check_peer(peer, me)
            if type(public) is bytes and len(public) == PUBLIC_KEY_SIZE:
                key = public
            else:
                key = check_bytes("peer_public_key", public, size=PUBLIC_KEY_SIZE)
            jobs.append((b, key, prefix + _PAIR.pack(min(me, b), max(me, b))))
        out: dict[int, bytes] = {}
        private = self._key
        for peer, public, info in jobs:
            try:
                shared = _exchange(private, public)
            except KeyAgreementError:
                raise KeyAgreementError(_LOW_ORDER_MESSAGE, peer_id=peer) from None
            out[peer] = _hkdf_sha256(shared, salt=HKDF_SALT, info=info, length=size)
        return out


def _public_from_private(private: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes_raw()


_LOW_ORDER_MESSAGE: Final[str] = (
    "X25519 key agreement failed: the peer public key is a low-order point"
)


def _exchange(key: X25519PrivateKey, public: bytes) -> bytes:
    try:
        shared = key.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        # OpenSSL refuses an all-zero result; re-raise without chaining its text.
        raise KeyAgreementError(_LOW_ORDER_MESSAGE) from None
    # Defence in depth, independent of the backend's own check.
    if hmac.compare_digest(shared, bytes(SHARED_SECRET_SIZE)):
        raise KeyAgreementError(_LOW_ORDER_MESSAGE)
    return shared


_CURVE_P: Final[int] = 2**255 - 19
# u-coordinates (mod p) of the points of order dividing 8 on Curve25519 and its
# twist: 0 and 1, the two points of order 8, and p - 1 (Bernstein, "How do I
# validate Curve25519 public keys?"; libsodium's blacklist).  X25519 clamps
# scalars to multiples of 8, so exactly these points give an all-zero output.
_SMALL_ORDER_U: Final[frozenset[int]] = frozenset(
    {
        0,
        1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
        _CURVE_P - 1,
    }
)
_U_MASK: Final[int] = (1 << 255) - 1


def is_low_order(public_key: bytes) -> bool:
    """Whether X25519 with ``public_key`` gives the all-zero secret for every private key.

    A table lookup (no scalar multiplication): the u-coordinate is decoded as
    RFC 7748 §5 prescribes (little-endian, bit 255 ignored, reduced mod p, so
    non-canonical encodings such as ``p`` and ``p + 1`` are caught too) and
    compared with the u-coordinates of the points of order 1, 2, 4 and 8.
    :func:`agree` refuses exactly these keys; this test lets a server refuse
    them on arrival for the cost of a set lookup.

    Args:
        public_key: A 32-byte X25519 public key.

    Returns:
        ``True`` for a low-order point.

    Raises:
        ParameterTypeError: ``public_key`` is not bytes.
        ParameterError: ``public_key`` is not 32 bytes long.
    """
    raw = check_bytes("public_key", public_key, size=PUBLIC_KEY_SIZE)
    return (int.from_bytes(raw, "little") & _U_MASK) % _CURVE_P in _SMALL_ORDER_U


def agree(private_key: bytes, peer_public_key: bytes) -> bytes:
    """Compute the raw X25519 shared secret (RFC 7748 §6.1).

    The raw secret is not uniformly distributed; feed it to :func:`derive_key`
    rather than using it as a key.

    Threat model: a malicious peer may send a low-order point to force a
    predictable shared secret; such points (and any input giving the all-zero
    output) are refused.

    Args:
        private_key: Our 32-byte private key.
        peer_public_key: The peer's 32-byte public key.

    Returns:
        The 32-byte shared secret.

    Raises:
        ParameterTypeError: An argument is not bytes.
        ParameterError: An argument is not 32 bytes long.
        KeyAgreementError: The result is all zero (``peer_public_key`` is a
            low-order point).  The message holds no key material.
    """
    private = check_bytes("private_key", private_key, size=PRIVATE_KEY_SIZE)
    public = check_bytes("peer_public_key", peer_public_key, size=PUBLIC_KEY_SIZE)
    return _exchange(X25519PrivateKey.from_private_bytes(private), public)


def _lp(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


_PAIR: Final[struct.Struct] = struct.Struct(">II")


def _info_prefix(purpose: Purpose, session_id: bytes, round_index: int, count: int) -> bytes:
    """The ``info`` string up to (and including) the number of ids that follow."""
    return b"".join(
        [
            bytes([KDF_VERSION]),
            _lp(_LABEL),
            _lp(purpose.value.encode("ascii")),
            _lp(session_id),
            struct.pack(">Q", round_index),
            bytes([count]),
        ]
    )


def _encode_info(
    purpose: Purpose, session_id: bytes, round_index: int, ids: tuple[int, ...]
) -> bytes:
    """The versioned, length-prefixed HKDF ``info`` string (see the module docstring)."""
    prefix = _info_prefix(purpose, session_id, round_index, len(ids))
    return prefix + b"".join(struct.pack(">I", i) for i in ids)


def _hkdf_sha256(ikm: bytes, *, salt: bytes | None, info: bytes, length: int) -> bytes:
    """Plain HKDF-SHA256 (RFC 5869); the known-answer tests exercise this function."""
    return HKDF(algorithm=_SHA256, length=length, salt=salt, info=info).derive(ikm)


# A hash algorithm object is an immutable description; one serves every call.
_SHA256: Final = hashes.SHA256()


def _check_context(session_id: object, round_index: object) -> tuple[bytes, int]:
    sid = check_bytes("session_id", session_id, min_size=1, max_size=MAX_SESSION_ID_SIZE)
    rnd = check_int("round_index", round_index, minimum=0, maximum=_MAX_ROUND)
    return sid, rnd


def _pair_context(
    purpose: object,
    session_id: object,
    round_index: object,
    client_id: object,
    peer_id: object,
    length: object,
) -> tuple[bytes, int]:
    """Validate the context of a pairwise key; return its HKDF ``info`` and length."""
    prefix, a, size = _pair_prefix(purpose, session_id, round_index, client_id, length)
    b = _check_peer(peer_id, a)
    return prefix + _PAIR.pack(min(a, b), max(a, b)), size


def _pair_prefix(
    purpose: object, session_id: object, round_index: object, client_id: object, length: object
) -> tuple[bytes, int, int]:
    """Validate the peer-independent context; return the ``info`` prefix, id and length."""
    if not isinstance(purpose, Purpose):
        raise ParameterTypeError("purpose", "a Purpose", purpose)
    if purpose is Purpose.SELF_MASK:
        raise ParameterError(
            "purpose",
            "Purpose.MASK or Purpose.SHARE_ENCRYPTION (use derive_self_mask_seed for SELF_MASK)",
            purpose,
        )
    sid, rnd = _check_context(session_id, round_index)
    a = check_int("client_id", client_id, minimum=0, maximum=MAX_CLIENT_ID)
    size = check_int("length", length, minimum=MIN_DERIVED_KEY_SIZE, maximum=MAX_DERIVED_KEY_SIZE)
    return _info_prefix(purpose, sid, rnd, 2), a, size


def _check_peer(peer_id: object, client_id: int) -> int:
    b = check_int("peer_id", peer_id, minimum=0, maximum=MAX_CLIENT_ID)
    if b == client_id:
        raise ParameterError("peer_id", "a client id different from client_id", b)
    return b


def derive_key(
    shared_secret: bytes,
    *,
    purpose: Purpose,
    session_id: bytes,
    round_index: int,
    client_id: int,
    peer_id: int,
    length: int = 32,
) -> bytes:
    """Derive a pairwise key from an X25519 shared secret with HKDF-SHA256.

    The derivation is symmetric in ``(client_id, peer_id)``: both ends of a pair
    get the same key.  Any change of purpose, session, round or pair gives an
    independent key (HKDF is a PRF in its ``info`` input).

    Args:
        shared_secret: The 32-byte output of :func:`agree`.
        purpose: :attr:`Purpose.MASK` or :attr:`Purpose.SHARE_ENCRYPTION`
            (the self-mask seed has its own function, :func:`derive_self_mask_seed`).
        session_id: Identifier of the aggregation session, 1 to 64 bytes.
        round_index: Round number, an ``int`` in ``[0, 2**64)``.
        client_id: One end of the pair, an ``int`` in ``[0, 2**32)``.
        peer_id: The other end, an ``int`` in ``[0, 2**32)``, different from
            ``client_id``.
        length: Output length in bytes, in ``[16, 8160]``.

    Returns:
        ``length`` pseudorandom bytes.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain, ``purpose`` is
            :attr:`Purpose.SELF_MASK`, or ``client_id == peer_id``.
    """
    secret = check_bytes("shared_secret", shared_secret, size=SHARED_SECRET_SIZE)
    info, size = _pair_context(purpose, session_id, round_index, client_id, peer_id, length)
    return _hkdf_sha256(secret, salt=HKDF_SALT, info=info, length=size)


def pairwise_key(
    private_key: bytes,
    peer_public_key: bytes,
    *,
    purpose: Purpose,
    session_id: bytes,
    round_index: int,
    client_id: int,
    peer_id: int,
    length: int = 32,
) -> bytes:
    """Agree and derive in one call: ``derive_key(agree(private_key, peer_public_key), ...)``.

    All context arguments are validated before the (comparatively slow) X25519
    operation.  See :func:`agree` and :func:`derive_key` for the arguments and
    errors.
    """
    # Validate the context first so a bad call costs no scalar multiplication.
    info, size = _pair_context(purpose, session_id, round_index, client_id, peer_id, length)
    shared = agree(private_key, peer_public_key)
    return _hkdf_sha256(shared, salt=HKDF_SALT, info=info, length=size)


def derive_self_mask_seed(
    seed: bytes, *, session_id: bytes, round_index: int, client_id: int
) -> bytes:
    """Derive the 32-byte PRG seed of a client's self-mask from its secret ``b_u``.

    HKDF-SHA256 with ``ikm = seed``, salt :data:`HKDF_SALT` and ``info`` of
    purpose :attr:`Purpose.SELF_MASK`, bound to the session, the round and the
    one client id.  The server recomputes it after reconstructing ``b_u`` from
    shares, so the derivation must be deterministic.

    Args:
        seed: The secret self-mask seed ``b_u``, 32 bytes (uniform from the CSPRNG).
        session_id: Identifier of the aggregation session, 1 to 64 bytes.
        round_index: Round number, an ``int`` in ``[0, 2**64)``.
        client_id: The client owning ``b_u``, an ``int`` in ``[0, 2**32)``.

    Returns:
        32 pseudorandom bytes, suitable as the seed of
        :func:`privfed.secagg.primitives.prg.expand`.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: An argument is outside its domain.
    """
    secret = check_bytes("seed", seed, size=32)
    sid, rnd = _check_context(session_id, round_index)
    cid = check_int("client_id", client_id, minimum=0, maximum=MAX_CLIENT_ID)
    info = _encode_info(Purpose.SELF_MASK, sid, rnd, (cid,))
    return _hkdf_sha256(secret, salt=HKDF_SALT, info=info, length=32)
