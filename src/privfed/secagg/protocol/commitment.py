"""Commitments to self-mask seeds.

A client commits to its self-mask seed ``b_u`` in its first message.  When the
server later rebuilds ``b_u`` from Shamir shares, it checks the result against
the commitment, so a wrong-but-well-formed share (from a faulty or malicious
client) is caught instead of silently corrupting the sum.

The commitment is SHA-256 over a domain-separated, length-prefixed encoding of
the session id, round index, client id and seed.  Because the seed is 32 uniform
bytes, the commitment is hiding under the usual random-oracle view of SHA-256,
and binding by its collision resistance.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from privfed._checks import check_int
from privfed.errors import ParameterError, ParameterTypeError

if TYPE_CHECKING:  # pragma: no cover
    from privfed.secagg.protocol.config import SecAggConfig

__all__ = [
    "SEED_SIZE",
    "checked_layers",
    "noise_layers_to_reveal",
    "noise_seed_commitment",
    "self_mask_commitment",
]

#: Size of a self-mask seed in bytes.
SEED_SIZE: Final = 32
_DOMAIN: Final = b"privfed/secagg/self-mask-commitment/v1"
_NOISE_DOMAIN: Final = b"privfed/secagg/noise-seed-commitment/v1"


def noise_seed_commitment(seed: bytes, *, session_id: bytes, client_id: int, layer: int) -> bytes:
    """The 32-byte commitment to a client's noise-layer seed (layer ``j``, 1-based).

    ``SHA-256(domain || len(session_id) || session_id || client_id u32 ||
    layer u16 || seed)``; hiding and binding as :func:`self_mask_commitment`.
    The server checks every rebuilt layer seed against it.
    """
    if not isinstance(seed, bytes) or len(seed) != SEED_SIZE:
        raise ParameterError("seed", f"bytes of length {SEED_SIZE}", None, secret=True)
    check_int("client_id", client_id, minimum=1, maximum=2**32 - 1)
    check_int("layer", layer, minimum=1, maximum=2**16 - 1)
    return _commitment(
        _NOISE_DOMAIN, session_id, client_id.to_bytes(4, "big") + layer.to_bytes(2, "big"), seed
    )


def self_mask_commitment(
    seed: bytes, *, session_id: bytes, round_index: int, client_id: int
) -> bytes:
    """The 32-byte commitment to a self-mask seed.

    Args:
        seed: The 32-byte self-mask seed (secret; never shown in errors).
        session_id: Public session id.
        round_index: Public round index, an int in ``[0, 2**32 - 1]``.
        client_id: The seed owner's id, an int in ``[1, 2**32 - 1]``.

    Returns:
        ``SHA-256(domain || len(session_id) || session_id || round_index ||
        client_id || seed)`` with one-byte and four-byte big-endian fields.

    Raises:
        ParameterTypeError: An argument has the wrong type.
        ParameterError: ``seed`` is not 32 bytes or an integer is out of range.
    """
    if not isinstance(seed, bytes):
        raise ParameterTypeError("seed", "bytes", seed)
    if len(seed) != SEED_SIZE:
        raise ParameterError("seed", f"bytes of length {SEED_SIZE}", None, secret=True)
    if not isinstance(session_id, bytes):
        raise ParameterTypeError("session_id", "bytes", session_id)
    if not 1 <= len(session_id) <= 255:
        raise ParameterError("session_id", "bytes of length 1 to 255", f"{len(session_id)} bytes")
    for name, value, low in (("round_index", round_index, 0), ("client_id", client_id, 1)):
        check_int(name, value, minimum=low, maximum=2**32 - 1)
    return _commitment(
        _DOMAIN, session_id, round_index.to_bytes(4, "big") + client_id.to_bytes(4, "big"), seed
    )


def _commitment(domain: bytes, session_id: bytes, fields: bytes, seed: bytes) -> bytes:
    """``SHA-256(domain || len(session_id) || session_id || fields || seed)``."""
    return hashlib.sha256(domain + bytes((len(session_id),)) + session_id + fields + seed).digest()


def noise_layers_to_reveal(config: SecAggConfig, survivors: int) -> tuple[int, ...]:
    """The noise layers whose seed shares the reveal rule allows for ``survivors`` survivors.

    With ``n = len(config.client_ids)`` clients and ``u`` survivors, the layers
    ``j`` with ``n - u < j <= L``: the noise a survivor added for the
    ``n - u`` clients that did not make it is exactly what is taken out again.
    """
    n = config.num_clients
    return tuple(range(max(n - survivors, 0) + 1, config.noise_layers + 1))


def checked_layers(
    config: SecAggConfig, requested: tuple[int, ...], survivors: int
) -> tuple[int, ...]:
    """The layers a request may name for ``survivors`` survivors: exactly the rule's.

    Raises:
        ValueError: ``requested`` differs from :func:`noise_layers_to_reveal`
            (the message names both, no secret).
    """
    layers = noise_layers_to_reveal(config, survivors) if config.noise_layers else ()
    if requested != layers:
        raise ValueError(
            f"asked for noise layers {list(requested)}; with {survivors} survivors "
            f"the reveal rule allows {list(layers)}"
        )
    return layers
