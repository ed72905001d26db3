"""Seeded Gaussian noise of the moment releases, shared by both wings (numpy only).

Unseeded (``seed=None``, the default everywhere), the noise comes from
:func:`privfed.dp.gaussian_noise`'s CSPRNG.  Seeded (experiments, tests), every
noised quantity of a release (a *section*: the sum, the second moment, the
counts) draws from its own stream, ``SHA-256(domain ‖ section ‖ separator ‖
seed)``.  The domain strings name where each derivation was first written;
they are part of the seeded-noise derivation, so they stay as they are
(changing one would change every seeded release made with it).
"""

from __future__ import annotations

import hashlib
from typing import Final

import numpy as np

from privfed.dp import gaussian_noise
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["FACTORY_DOMAIN", "LATENT_DOMAIN", "add_gaussian", "section_seed"]

#: The latent engine's derivation (its release module's first home).
LATENT_DOMAIN: Final = (b"privfed.models.release/v1/", b"/")
#: The factory engine's derivation (the DP latent-Gaussian factory's cells).
FACTORY_DOMAIN: Final = (b"latent-gaussian-dp|", b"|")


def section_seed(
    seed: int | bytes | None, section: str, *, domain: tuple[bytes, bytes] = LATENT_DOMAIN
) -> bytes | None:
    """The seed of one section's stream, or ``None`` (CSPRNG noise) when ``seed`` is ``None``.

    Args:
        seed: An int >= 0 (encoded big-endian), bytes, or ``None``.
        section: The noised quantity's name.
        domain: ``(prefix, separator)`` of the derivation
            (:data:`LATENT_DOMAIN` or :data:`FACTORY_DOMAIN`).

    Raises:
        ParameterTypeError: ``seed`` is neither an int, bytes nor ``None``.
        ParameterError: A negative int seed (its value is not shown).
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | bytes):
        raise ParameterTypeError("seed", "an int >= 0, bytes or None", seed)
    if isinstance(seed, int):
        if seed < 0:
            raise ParameterError("seed", "an int >= 0", None, secret=True)
        seed = seed.to_bytes((seed.bit_length() + 8) // 8, "big")
    prefix, separator = domain
    return hashlib.sha256(prefix + section.encode() + separator + seed).digest()


def add_gaussian(
    values: np.ndarray,
    noise_std: float,
    seed: int | bytes | None,
    section: str,
    *,
    domain: tuple[bytes, bytes] = LATENT_DOMAIN,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """``values + scale · N(0, noise_std² I)``, float64, from the section's stream.

    Args:
        values: The exact quantity (float64 array).
        noise_std: Std of the noise per entry (before ``scale``).
        seed: See :func:`section_seed`.
        section: The noised quantity's name.
        domain: See :func:`section_seed`.
        scale: Optional per-entry factor broadcast against the noise (e.g.
            ``1/√2`` on the off-diagonal entries of a packed second moment).
    """
    noise = gaussian_noise(values.shape, noise_std, seed=section_seed(seed, section, domain=domain))
    return values + (noise if scale is None else scale * noise)
