"""Class-conditional Gaussians fitted to a noisy release (pure post-processing).

Everything here reads only a :class:`~privfed.engines.latent.release.NoisyLatentStatistics`
(the DP output) and public constants, so by the post-processing property it
costs no privacy.

Estimator for class ``c`` with released ``m̃ = m + e``, ``M̃ = M + E`` and count
``n`` (``e ~ N(0, σ_s² I)``, ``E`` symmetric zero-mean noise):

* mean ``μ̂ = m̃ / n``;
* covariance ``Σ̂ = M̃ / n − μ̂ μ̂ᵀ + (σ_s² + g) / n² · I``.

Bias correction: ``E[μ̂ μ̂ᵀ] = μ μᵀ + E[e eᵀ] / n² = μ μᵀ + (σ_s² + g)/n² · I``
where ``g`` is the extra variance of rounding the noise to the grid (``2**-2f/12``
for grid placement, 0 otherwise), and ``E[M̃ / n] = M / n`` because ``E`` has
zero mean.  Adding the term therefore makes ``Σ̂`` unbiased for the empirical
(divide-by-``n``) covariance of the clipped latents when counts are public.
With noisy counts (ADD_REMOVE) ``n`` is the noisy count, floored at
``min_count``, and the correction is approximate.

``Σ̂`` is then symmetrised and projected to the PSD cone with an eigenvalue
floor: ``Σ⁺ = V max(Λ, λ_min) Vᵀ``, the Frobenius-nearest matrix with
eigenvalues ``>= λ_min``.  The default floor ``1e-3 R² / d`` is a fixed fraction
of the clip radius' per-coordinate share, chosen without data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from privfed.engines.latent.release import NoisyLatentStatistics, _PerClassRecord
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["ClassGaussians", "fit_class_gaussians", "project_psd"]


def project_psd(matrix: np.ndarray, eigenvalue_floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Project symmetric matrices to the PSD cone with an eigenvalue floor.

    Args:
        matrix: ``float64`` ``(..., d, d)``; symmetrised first (``(A + Aᵀ)/2``).
        eigenvalue_floor: ``λ_min >= 0``; eigenvalues below it are raised to it.

    Returns:
        ``(projected, sqrt_factor)``: the projected matrices and factors ``F``
        with ``F Fᵀ = projected`` (``F = V diag(sqrt(λ))``), same shape.
    """
    if not math.isfinite(eigenvalue_floor) or eigenvalue_floor < 0:
        raise ParameterError("eigenvalue_floor", "a finite float >= 0", eigenvalue_floor)
    a = np.asarray(matrix, dtype=np.float64)
    sym = 0.5 * (a + np.swapaxes(a, -1, -2))
    values, vectors = np.linalg.eigh(sym)
    values = np.maximum(values, eigenvalue_floor)
    factor = vectors * np.sqrt(values)[..., None, :]
    projected = (vectors * values[..., None, :]) @ np.swapaxes(vectors, -1, -2)
    return projected, factor


@dataclass(frozen=True, eq=False)
class ClassGaussians(_PerClassRecord):
    """One Gaussian per class in latent space.

    Attributes:
        means: ``float64`` ``(K, d)``.
        covariances: ``float64`` ``(K, d, d)``, symmetric PSD.
        factors: ``float64`` ``(K, d, d)`` with ``F Fᵀ = covariance``.
        present: ``bool`` ``(K,)``: classes with a usable estimate (count
            ``>= min_count``); absent classes cannot be sampled.
        counts: ``float64`` ``(K,)``: the (released) counts used.
    """

    means: np.ndarray
    covariances: np.ndarray
    factors: np.ndarray
    present: np.ndarray
    counts: np.ndarray

    _ROWS: ClassVar[str] = "means"

    def sample(
        self,
        num_per_class: int | Sequence[int],
        *,
        seed: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw latents from every present class.

        Sampling is post-processing of the release; its generator only needs to
        be a good statistical PRNG (numpy PCG64, seeded or from OS entropy).

        Args:
            num_per_class: Samples per present class (an int), or one count per
                class (length ``K``; absent classes must get 0).
            seed: Seed of the generator; ``None`` for fresh entropy.

        Returns:
            ``(latents float32 (M, d), labels int64 (M,))``, classes in order.

        Raises:
            ParameterError: On negative counts, a wrong length, or samples
                requested from an absent class.
        """
        if isinstance(num_per_class, int | np.integer) and not isinstance(num_per_class, bool):
            if num_per_class < 0:
                raise ParameterError("num_per_class", "an int >= 0", num_per_class)
            wanted = np.where(self.present, int(num_per_class), 0)
        else:
            wanted = np.asarray(num_per_class)
            if wanted.shape != (self.num_classes,) or not np.issubdtype(wanted.dtype, np.integer):
                raise ParameterError(
                    "num_per_class", f"an int or {self.num_classes} ints", num_per_class
                )
            if (wanted < 0).any():
                raise ParameterError("num_per_class", "non-negative counts", num_per_class)
            if (wanted[~self.present] > 0).any():
                raise ParameterError(
                    "num_per_class", "0 for classes without an estimate", num_per_class
                )
        rng = np.random.default_rng(seed)
        latents, labels = [], []
        for c in range(self.num_classes):
            count = int(wanted[c])
            if count == 0:
                continue
            noise = rng.standard_normal((count, self.dim))
            latents.append(self.means[c] + noise @ self.factors[c].T)
            labels.append(np.full(count, c, dtype=np.int64))
        if not latents:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        return (
            np.concatenate(latents).astype(np.float32),
            np.concatenate(labels),
        )

    def log_density(self, latents: np.ndarray, cls: int) -> np.ndarray:
        """Log density of ``latents`` ``(N, d)`` under class ``cls``'s Gaussian, ``(N,)``."""
        if not 0 <= cls < self.num_classes or not self.present[cls]:
            raise ParameterError("cls", "a present class index", cls)
        z = np.asarray(latents, dtype=np.float64)
        if z.ndim != 2 or z.shape[1] != self.dim:
            raise ParameterError("latents", f"an array of shape (N, {self.dim})", z.shape)
        values, vectors = np.linalg.eigh(self.covariances[cls])
        centred = (z - self.means[cls]) @ vectors
        mahalanobis = (centred**2 / values).sum(axis=1)
        out: np.ndarray = -0.5 * (
            mahalanobis + np.log(values).sum() + self.dim * math.log(2 * math.pi)
        )
        return out


def fit_class_gaussians(
    release: NoisyLatentStatistics,
    *,
    eigenvalue_floor: float | None = None,
    min_count: float = 1.0,
    bias_correction: bool = True,
) -> ClassGaussians:
    """Fit one Gaussian per class to a noisy release (post-processing, no privacy cost).

    Args:
        release: The DP release.
        eigenvalue_floor: ``λ_min >= 0`` of the PSD projection, latent units²;
            default ``1e-3 R² / d``.
        min_count: Classes whose released count is below this (``>= 1``) are
            marked absent.
        bias_correction: Add ``(σ_s² + g)/n² · I`` (module docstring).

    Returns:
        The per-class Gaussians.
    """
    if not isinstance(release, NoisyLatentStatistics):
        raise ParameterTypeError("release", "a NoisyLatentStatistics", release)
    if not math.isfinite(min_count) or min_count < 1.0:
        raise ParameterError("min_count", "a finite float >= 1", min_count)
    d = release.dim
    floor = 1e-3 * release.clip_norm**2 / d if eigenvalue_floor is None else eigenvalue_floor
    present = release.counts >= min_count
    n = np.where(present, release.counts, 1.0)
    means = release.sums / n[:, None]
    cov = release.second_moments / n[:, None, None] - means[:, :, None] * means[:, None, :]
    if bias_correction:
        variance = release.noise_std_sum**2 + release.grid_variance
        cov = cov + (variance / n**2)[:, None, None] * np.eye(d)[None, :, :]
    covariances, factors = project_psd(cov, floor)
    means = np.where(present[:, None], means, 0.0)
    return ClassGaussians(
        means=means,
        covariances=covariances,
        factors=factors,
        present=present,
        counts=release.counts.copy(),
    )
