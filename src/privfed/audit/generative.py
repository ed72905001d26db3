"""Membership inference against per-client generative models ("factories") (pure numpy).

A factory that memorised its training images denoises or reconstructs them
better than fresh images of the same class.  Both attacks here take the model
as a plain callable on numpy arrays, so they depend on no engine; wrap a torch
model with :func:`privfed.audit.torch_scoring.numpy_callable`.

* :func:`denoising_loss_scores` -- the per-noise-level denoising loss of a
  diffusion model (Carlini et al. 2023, arXiv:2301.13188, §5; Duan et al. 2023,
  arXiv:2302.01316).  The loss at each σ is reported separately, because
  membership usually shows at a narrow band of noise levels; the default score
  averages them (choosing the best σ on the evaluation data itself would be
  optimistic, so do that on a held-out split).
* :func:`reconstruction_error_scores` -- the reconstruction error of an
  autoencoder (Hayes et al. 2019, arXiv:1705.07663 discuss the generative case).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privfed._checks import (
    check_int,
    check_seed,
    check_vector,
)
from privfed.audit._progress import progress_ticker
from privfed.errors import AuditError, NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = [
    "DenoiseFn",
    "DenoisingLoss",
    "ReconstructFn",
    "denoising_loss_scores",
    "reconstruction_error_scores",
]

#: ``denoise(x_noisy, sigma) -> x_hat``: x_noisy float array (b, ...) = x + sigma·N(0, I);
#: returns the model's estimate of x with the same shape.  sigma is a float > 0.
DenoiseFn = Callable[[NDArray[np.float64], float], ArrayLike]

#: ``reconstruct(x) -> x_hat``: the autoencoder's reconstruction, same shape as x.
ReconstructFn = Callable[[NDArray[np.float64]], ArrayLike]


def _as_samples(name: str, value: Any) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, "an array of shape (n, ...)", value) from exc
    if arr.ndim < 2 or arr.shape[0] < 1:
        raise ParameterError(name, "an array of shape (n, ...) with n >= 1", f"shape {arr.shape}")
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        raise NonFiniteInputError(name, count=bad)
    return arr


def _call(fn: Callable[..., ArrayLike], shape: tuple[int, ...], *args: Any) -> NDArray[np.float64]:
    out = np.asarray(fn(*args), dtype=np.float64)
    if out.shape != shape:
        raise AuditError(f"model callable returned shape {out.shape}, expected {shape}")
    if not np.all(np.isfinite(out)):
        raise AuditError("model callable returned non-finite values")
    return out


@dataclass(frozen=True)
class DenoisingLoss:
    """Per-record denoising losses of a diffusion model.

    Attributes:
        sigmas: Noise levels σ evaluated, float64 shape (T,), in the data's units.
        losses: Mean squared error per record and σ, float64 shape (n, T),
            averaged over pixels and noise draws.
        scores: −mean over σ of ``losses``, shape (n,); higher ⇒ more member-like.
    """

    sigmas: NDArray[np.float64] = field(repr=False)
    losses: NDArray[np.float64] = field(repr=False)
    scores: NDArray[np.float64] = field(repr=False)

    def __post_init__(self) -> None:
        if self.losses.ndim != 2 or self.losses.shape[1] != self.sigmas.size:
            raise ParameterError("losses", "shape (n, len(sigmas))", f"shape {self.losses.shape}")

    def scores_at(self, index: int) -> NDArray[np.float64]:
        """Scores (−loss) at the ``index``-th noise level only, shape (n,)."""
        if not 0 <= index < self.sigmas.size:
            raise ParameterError("index", f"an int in [0, {self.sigmas.size})", index)
        return np.asarray(-self.losses[:, index], dtype=np.float64)


def denoising_loss_scores(
    samples: ArrayLike,
    denoise: DenoiseFn,
    sigmas: ArrayLike,
    *,
    num_noise_draws: int = 1,
    batch_size: int = 256,
    seed: int | None = None,
    progress: bool = False,
) -> DenoisingLoss:
    """Per-noise-level denoising loss of each record under a diffusion model.

    The same noise draws are used for every record position across calls with
    the same seed, so member and non-member losses are paired in distribution.

    Args:
        samples: Records, float array of shape (n, ...) (e.g. (n, C, H, W)).
        denoise: See :data:`DenoiseFn`.
        sigmas: Noise levels, 1-D, each finite and > 0 (EDM-style σ; for a
            DDPM with ᾱ_t, pass σ_t = √((1 − ᾱ_t)/ᾱ_t) and scale inside ``denoise``).
        num_noise_draws: Noise draws averaged per (record, σ), ≥ 1.
        batch_size: Records per call of ``denoise``, ≥ 1.
        seed: Seed of the noise draws; None for fresh entropy.
        progress: Show progress per call of ``denoise`` (tqdm if installed).

    Returns:
        A :class:`DenoisingLoss`.

    Raises:
        AuditError: ``denoise`` returns the wrong shape or non-finite values.
    """
    x = _as_samples("samples", samples)
    if not callable(denoise):
        raise ParameterTypeError("denoise", "a callable", denoise)
    levels = check_vector("sigmas", sigmas)
    if np.any(levels <= 0):
        raise ParameterError("sigmas", "values > 0", float(levels.min()))
    draws = check_int("num_noise_draws", num_noise_draws, minimum=1, numpy=True)
    step = check_int("batch_size", batch_size, minimum=1, numpy=True)
    rng = np.random.default_rng(check_seed("seed", seed))
    n = x.shape[0]
    losses = np.zeros((n, levels.size))
    axes = tuple(range(1, x.ndim))
    calls = levels.size * draws * math.ceil(n / step)
    tick = progress_ticker(calls, bool(progress), "denoising batches")
    for t, sigma in enumerate(levels):
        for _ in range(draws):
            noise = rng.standard_normal(x.shape)
            for start in range(0, n, step):
                block = x[start : start + step]
                noisy = block + sigma * noise[start : start + step]
                x_hat = _call(denoise, block.shape, noisy, float(sigma))
                losses[start : start + step, t] += np.mean((x_hat - block) ** 2, axis=axes)
                tick()
    losses /= draws
    return DenoisingLoss(sigmas=levels, losses=losses, scores=-losses.mean(axis=1))


def reconstruction_error_scores(
    samples: ArrayLike, reconstruct: ReconstructFn, *, batch_size: int = 256
) -> NDArray[np.float64]:
    """Minus the mean squared reconstruction error of each record under an autoencoder.

    Args:
        samples: Records, float array of shape (n, ...).
        reconstruct: See :data:`ReconstructFn`.
        batch_size: Records per call, ≥ 1.

    Returns:
        float64 array of shape (n,); higher (smaller error) ⇒ more member-like.
    """
    x = _as_samples("samples", samples)
    if not callable(reconstruct):
        raise ParameterTypeError("reconstruct", "a callable", reconstruct)
    step = check_int("batch_size", batch_size, minimum=1, numpy=True)
    axes = tuple(range(1, x.ndim))
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], step):
        block = x[start : start + step]
        x_hat = _call(reconstruct, block.shape, block)
        out[start : start + step] = -np.mean((x_hat - block) ** 2, axis=axes)
    return out
