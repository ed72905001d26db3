"""A cheap factory: a Gaussian in a low-dimensional latent space.

Two bases, chosen at construction:

**Private PCA (``codec=None``, the historical mode).**  The factory fits
probabilistic PCA (Tipping & Bishop 1999) to one client's images of one
class, flattened to ``D = C·H·W`` values:

    x = μ + Wz + ε,   z ~ N(0, I_k),   ε ~ N(0, s² I_D),

with ``μ`` the mean image, ``W = V_kᵀ·diag(sqrt(λ_i − s²))`` from the top
``k`` principal directions ``V_k`` and variances ``λ_i``, and ``s²`` the mean
of the discarded variances (the maximum-likelihood solution).  Shipped
values: ``D + k·D + k + 1``.  The principal directions are computed from the
client's private images, so **the basis itself is a release** of private
data (with one image the factory reproduces it).

**Public codec (``codec=`` a :class:`privfed.engines.codecs.Codec`).**  The
basis is a frozen codec fitted on *public* data (e.g.
:class:`~privfed.engines.codecs.PCACodec` or
:class:`~privfed.engines.codecs.ConvAutoencoderCodec`), known to the server
and never shipped.  The factory encodes its images, fits a full-covariance
Gaussian ``N(m, Σ)`` to the ``d`` latents, and samples by decoding draws from
it -- the latent engine's codec + class Gaussian, per client.  Shipped
values: ``d + d²`` (the mean and a square-root factor of ``Σ``).  Only the
latent mean and covariance depend on private data.

Neither mode has a formal privacy guarantee by default (:attr:`privacy` is
``mechanism="none"``): the mean and covariance are deterministic functions of
the images.  Use this factory where the matrix's unlearning, not differential
privacy, is the requirement, and audit it
(:mod:`privfed.engines.factory.audit`).  The public-codec mode removes the
private basis from what is released; it does not make the rest private.

**DP mode (codec mode with ``dp=`` a :class:`LatentGaussianDP`).**  The
latent engine's release, per cell: every latent is clipped to the codec's
public radius ``R`` (``codec.default_clip_norm``, chosen without data), and
the sum ``Σ z`` and second moment ``Σ z zᵀ`` receive Gaussian noise planned
by :func:`privfed.engines.moments.planning.plan_latent_release` for the target (ε, δ) under
replace-one adjacency (the cell's size ``n`` ships in the manifest, so it is
public; the joint sensitivity of the pair is exact).  The mean and covariance
are then post-processing: ``S̃/n``, ``M̃/n − m mᵀ`` plus the noise's bias
correction ``σ_s²/n² I``, projected to the PSD cone with the usual floor.
The factory's release event (:attr:`release`) is a whitened
:class:`privfed.dp.GaussianRelease` with the joint multiplier, named after its
cell; the manifest ships it and the job's ledger records it as it is.  The
sums are float64 (not the latent engine's exact fixed-point sums) and the
noise is continuous floating point: rounding and Mironov's 2012
floating-point attack are not accounted for.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from privfed._checks import check_delta, check_finite_positive, check_int
from privfed.dp.events import Partition
from privfed.dp.releases.gaussian import GaussianRelease
from privfed.engines.codecs.base import Codec
from privfed.engines.factory.base import (
    ClientId,
    FactoryBase,
    not_fitted_error,
    validate_images,
)
from privfed.engines.moments.planning import LatentReleasePlan
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError

__all__ = [
    "LIKELIHOOD_VARIANCE_FLOOR",
    "LatentGaussianDP",
    "LatentGaussianFactory",
    "cell_plan",
    "codec_fingerprint",
]

_TENSOR_NAMES = ("mean", "components", "scales", "residual_std")
_CODEC_TENSOR_NAMES = ("latent_mean", "latent_factor")

#: Smallest variance (pixel units², pixels in [0, 1]) per direction used by
#: :meth:`LatentGaussianFactory.log_likelihood` in private-PCA mode, so that a
#: rank-deficient fit (``s² = 0``) still has a finite density.
LIKELIHOOD_VARIANCE_FLOOR = 1e-6

#: Eigenvalue floor of the latent covariance in codec mode, as a fraction of
#: the codec's per-coordinate clip share ``R² / d`` (chosen without data, as in
#: :mod:`privfed.engines.latent.gaussians`).
_LATENT_FLOOR_FRACTION = 1e-3

_PROBE_IMAGES = 8
_PROBE_DECIMALS = 4

#: Latents are clipped to ``R * (1 - 2**-20)``, so rounding keeps every norm below R.
_CLIP_TARGET = 1.0 - 2.0**-20


@dataclass(frozen=True)
class LatentGaussianDP:
    """Differential privacy of a codec-mode :class:`LatentGaussianFactory`.

    Attributes:
        epsilon: Target ε of the factory's release, finite and > 0.
        delta: Target δ, in (0, 1).
        seed: ``None`` (default) draws the noise from the OS CSPRNG; an int
            >= 0 or bytes makes it reproducible (experiments, tests), and
            the privacy record says ``seeded=True``.  Never shown in a repr.
    """

    epsilon: float
    delta: float
    seed: int | bytes | None = None

    def __post_init__(self) -> None:
        check_finite_positive("epsilon", self.epsilon)
        check_delta(self.delta)
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, (int, bytes))
        ):
            raise ParameterTypeError("seed", "an int >= 0, bytes or None", "a value")
        if isinstance(self.seed, int) and self.seed < 0:
            raise ParameterError("seed", "an int >= 0, bytes or None", "a negative int")

    def __repr__(self) -> str:
        return (
            f"LatentGaussianDP(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"seeded={self.seed is not None})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (the seed only as seeded or not)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "seeded": self.seed is not None}


def _stream_seed(seed: int | bytes | None) -> bytes | None:
    """The cell's seed as the factory derivation reads it (an int as its decimal digits)."""
    if seed is None or isinstance(seed, bytes):
        return seed
    return str(seed).encode()


def cell_plan(dp: LatentGaussianDP, codec: Codec) -> LatentReleasePlan:
    """The latent-moment plan of one DP cell: ``dp``'s target at the codec's public radius.

    Replace-one adjacency (the cell's size ships in its manifest).  Its
    :meth:`~privfed.engines.moments.planning.LatentReleasePlan.ledger` is the
    ledger budgeted at the target the plan was made for.  Cached.
    """
    from privfed.dp import Adjacency
    from privfed.engines.moments.planning import plan_latent_release

    return plan_latent_release(
        dp.epsilon,
        dp.delta,
        clip_norm=float(codec.default_clip_norm),
        dim=codec.latent_dim,
        adjacency=Adjacency.REPLACE_ONE,
    )


def _dp_moments(
    z: torch.Tensor,
    plan: LatentReleasePlan,
    dp: LatentGaussianDP,
    floor: float,
    *,
    name: str,
    partition: Partition,
) -> tuple[torch.Tensor, torch.Tensor, GaussianRelease]:
    """Noisy mean and covariance factor of clipped latents, and the release's event."""
    from privfed.dp import GAUSSIAN_SAMPLER, Adjacency
    from privfed.engines.moments.noise import FACTORY_DOMAIN, add_gaussian

    n, d = z.shape
    radius = plan.clip_norm
    x = z.detach().cpu().double().numpy()
    norms = np.linalg.norm(x, axis=1)
    target = radius * _CLIP_TARGET
    scale = np.where(norms > target, target / np.maximum(norms, 1e-300), 1.0)
    x = x * scale[:, None]
    seed = _stream_seed(dp.seed)
    sums = add_gaussian(x.sum(axis=0), plan.noise_std_sum, seed, "s", domain=FACTORY_DOMAIN)
    second = add_gaussian(x.T @ x, plan.noise_std_second_moment, seed, "m", domain=FACTORY_DOMAIN)
    second = 0.5 * (second + second.T)
    mean = sums / n
    cov = second / n - np.outer(mean, mean) + (plan.noise_std_sum**2 / n**2) * np.eye(d)
    values, vectors = np.linalg.eigh(cov)
    values = np.maximum(values, floor)
    factor = vectors * np.sqrt(values)
    # Whitened, the joint release is exactly plan.mu-GDP; the multiplier is rounded up
    # so that the ledger's 1/multiplier never exceeds plan.mu.
    multiplier = math.nextafter(1.0 / plan.mu, math.inf)
    release = GaussianRelease(
        name=name,
        partition=partition,
        l2_sensitivity=1.0,
        noise_std=multiplier,
        adjacency=Adjacency.REPLACE_ONE,
        sampler=GAUSSIAN_SAMPLER,
        seeded=dp.seed is not None,
    )
    return (
        torch.from_numpy(mean).float(),
        torch.from_numpy(np.ascontiguousarray(factor)).float(),
        release,
    )


def codec_fingerprint(codec: Codec) -> str:
    """Behavioural SHA-256 fingerprint of a codec (hex, 64 characters).

    The codec encodes a fixed pseudo-random probe batch and decodes a fixed
    latent batch; the outputs, rounded to 4 decimals, are hashed with the
    codec's class name and shapes.  It identifies which codec a factory was
    fitted with, so that a factory is never decoded through another one.  It is
    a consistency check, not a cryptographic binding: two codecs agreeing on
    the probes to 4 decimals share a fingerprint, and a platform whose float
    arithmetic differs near a rounding boundary could produce a different one.

    Args:
        codec: Any :class:`~privfed.engines.codecs.Codec`.

    Returns:
        64 lowercase hex digits.
    """
    if not isinstance(codec, Codec):
        raise ParameterTypeError("codec", "a privfed.engines.codecs.Codec", codec)
    shape = tuple(int(s) for s in codec.image_shape)
    d = int(codec.latent_dim)
    gen = torch.Generator().manual_seed(20_240_601)
    images = torch.rand((_PROBE_IMAGES, *shape), generator=gen)
    latents = torch.randn((_PROBE_IMAGES, d), generator=gen)
    with torch.no_grad():
        encoded = codec.encode(images).detach().cpu().double().numpy()
        decoded = codec.decode(latents).detach().cpu().double().numpy()
    digest = hashlib.sha256()
    digest.update(f"{type(codec).__name__}|{shape}|{d}".encode())
    for arr in (encoded, decoded):
        digest.update(np.ascontiguousarray(np.round(arr, _PROBE_DECIMALS) + 0.0).tobytes())
    return digest.hexdigest()


def _gaussian_log_density(
    deviations: torch.Tensor, directions: torch.Tensor, variances: torch.Tensor, rest: float
) -> torch.Tensor:
    """log N(r; 0, Uᵀ diag(v) U + rest·(I − UᵀU)) for rows r of ``deviations``.

    ``directions`` U has orthonormal rows (k, D); ``variances`` v (k,) > 0;
    ``rest`` > 0 is the variance of the D − k remaining directions.
    """
    dim = deviations.shape[1]
    k = directions.shape[0]
    proj = deviations @ directions.T
    quad = (proj**2 / variances).sum(dim=1)
    resid = (deviations**2).sum(dim=1) - (proj**2).sum(dim=1)
    quad = quad + resid.clamp(min=0.0) / rest
    log_det = torch.log(variances).sum() + (dim - k) * math.log(rest)
    return -0.5 * (dim * math.log(2.0 * math.pi) + log_det + quad)


class LatentGaussianFactory(FactoryBase):
    """A Gaussian per (class, client) in a private-PCA or public-codec latent space.

    Fits in milliseconds.  See the module docstring for the two modes and what
    each one releases.  Its :attr:`privacy` is always ``mechanism="none"``:
    this factory has no formal guarantee.  In codec mode :meth:`save` writes
    the codec's fingerprint, never the codec.

    Args:
        latent_dim: Private-PCA mode: number ``k`` of principal directions
            kept (int >= 1, default 16); the fit uses ``min(latent_dim, N − 1, D)``.
            Codec mode: must be ``None`` or equal to ``codec.latent_dim``.
        class_id: Class the factory generates (written into the manifest).
        client_id: Client that trains it (written into the manifest).
        codec: A frozen public codec, or ``None`` for private PCA.  Never
            shipped: the receiver must hold the same codec (its fingerprint is
            in the manifest and checked by :meth:`load`).
        dp: A :class:`LatentGaussianDP` target (codec mode only) to fit the
            latent Gaussian from a DP release, or ``None`` (default).

    Raises:
        ParameterTypeError: ``latent_dim`` is not an int, ``codec`` not a
            codec, ``dp`` not a :class:`LatentGaussianDP`.
        ParameterError: ``latent_dim`` < 1, it contradicts the codec, or
            ``dp`` is given without a codec (the private basis would be an
            unprotected release).
    """

    factory_type: ClassVar[str] = "latent-gaussian"

    def __init__(
        self,
        *,
        latent_dim: int | None = None,
        class_id: int | None = None,
        client_id: ClientId | None = None,
        codec: Codec | None = None,
        dp: LatentGaussianDP | None = None,
    ) -> None:
        if codec is not None and not isinstance(codec, Codec):
            raise ParameterTypeError("codec", "a privfed.engines.codecs.Codec or None", codec)
        if dp is not None:
            if not isinstance(dp, LatentGaussianDP):
                raise ParameterTypeError("dp", "a LatentGaussianDP or None", dp)
            if codec is None:
                raise ParameterError(
                    "dp",
                    "None in private-PCA mode (its basis is an unprotected release); "
                    "pass a public codec",
                    repr(dp),
                )
        self.dp = dp
        if latent_dim is not None:
            check_int("latent_dim", latent_dim, minimum=1, expected=None)
            if codec is not None and latent_dim != codec.latent_dim:
                raise ParameterError(
                    "latent_dim", f"None or the codec's latent_dim {codec.latent_dim}", latent_dim
                )
        if latent_dim is None:
            latent_dim = 16 if codec is None else int(codec.latent_dim)
        self.latent_dim = latent_dim
        self._init_identity(class_id, client_id)
        self._codec = codec
        self._codec_fingerprint = None if codec is None else codec_fingerprint(codec)
        self._tensors: dict[str, torch.Tensor] | None = None

    def __repr__(self) -> str:
        return self._repr_with(f"latent_dim={self.latent_dim}, basis={self.basis!r}")

    @property
    def basis(self) -> str:
        """``"private-pca"`` (basis fitted on the client's images) or ``"public-codec"``."""
        return "private-pca" if self._codec is None else "public-codec"

    @property
    def codec(self) -> Codec | None:
        """The public codec of codec mode, ``None`` in private-PCA mode."""
        return self._codec

    def _parameter_tensors(self) -> list[torch.Tensor]:
        # The shipped tensors; the codec is not shipped.
        return list(self._require_fitted()[0].values())

    def _latent_floor(self, codec: Codec) -> float:
        r = float(codec.default_clip_norm)
        return _LATENT_FLOOR_FRACTION * r * r / codec.latent_dim

    def fit(self, images: torch.Tensor) -> LatentGaussianFactory:
        """Fit to ``images`` (float ``(N, C, H, W)`` in ``[0, 1]``, N >= 1).

        Private-PCA mode: probabilistic PCA in float64 on the CPU.  Codec mode:
        the images are encoded with the codec (their shape must be the codec's
        ``image_shape``) and a Gaussian is fitted to the latents: sample mean,
        unbiased covariance (zero for N = 1), projected to eigenvalues
        ``>= 1e-3·R²/d`` (``R`` the codec's default clip norm).  Deterministic.
        A failed call leaves the factory unchanged.

        Returns:
            ``self``.

        Raises:
            ParameterError, ParameterTypeError, NonFiniteInputError: Bad images
                (or images of another shape than the codec's).
        """
        data = validate_images(images)
        n, c, h, w = data.shape
        if self._codec is not None:
            codec = self._codec
            if (c, h, w) != tuple(codec.image_shape):
                raise ParameterError(
                    "images", f"images of the codec's shape {tuple(codec.image_shape)}", (c, h, w)
                )
            z = codec.encode(data).detach().cpu().double()
            if self.dp is not None:
                plan = cell_plan(self.dp, codec)
                dp_mean, dp_factor, release = _dp_moments(
                    z,
                    plan,
                    self.dp,
                    self._latent_floor(codec),
                    name=self.release_name,
                    partition=self.release_partition,
                )
                tensors = {"latent_mean": dp_mean, "latent_factor": dp_factor.contiguous()}
                self._tensors = tensors
                self._image_shape = (c, h, w)
                self._sample_count = n
                self._set_release(release, plan.clip_norm)
                return self
            mean = z.mean(dim=0)
            centred = z - mean
            cov = centred.T @ centred / (n - 1) if n > 1 else torch.zeros(z.shape[1], z.shape[1])
            values, vectors = torch.linalg.eigh(0.5 * (cov + cov.T).double())
            values = values.clamp(min=self._latent_floor(codec))
            factor = vectors * values.sqrt()
            tensors = {
                "latent_mean": mean.float(),
                "latent_factor": factor.float().contiguous(),
            }
        else:
            x = data.reshape(n, -1).double()
            d = x.shape[1]
            mean = x.mean(dim=0)
            k = max(0, min(self.latent_dim, n - 1, d))
            if k == 0:
                components = torch.zeros((0, d), dtype=torch.float64)
                scales = torch.zeros(0, dtype=torch.float64)
                residual = torch.zeros(1, dtype=torch.float64)
            else:
                _, sing, vh = torch.linalg.svd(x - mean, full_matrices=False)
                variances = sing**2 / (n - 1)
                discarded = variances[k:]
                # ML residual variance: mean of the discarded variances over all
                # D - k directions (directions beyond rank N - 1 have variance 0).
                s2 = float(discarded.sum()) / (d - k) if d > k else 0.0
                components = vh[:k]
                scales = (variances[:k] - s2).clamp(min=0.0).sqrt()
                residual = torch.tensor([s2**0.5], dtype=torch.float64)
            tensors = {
                "mean": mean.float(),
                "components": components.float().contiguous(),
                "scales": scales.float(),
                "residual_std": residual.float(),
            }
        self._tensors = tensors
        self._image_shape = (c, h, w)
        self._sample_count = n
        return self

    def _require_fitted(self) -> tuple[dict[str, torch.Tensor], tuple[int, int, int]]:
        if self._tensors is None or self._image_shape is None:
            raise not_fitted_error()
        return self._tensors, self._image_shape

    def _check_queries(self, images: object, shape: tuple[int, int, int]) -> torch.Tensor:
        data = validate_images(images)
        if tuple(data.shape[1:]) != shape:
            raise ParameterError(
                "images", f"images of the factory's shape {shape}", tuple(data.shape[1:])
            )
        return data

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` images: float32 CPU tensor ``(n, C, H, W)`` in ``[0, 1]``.

        Args:
            n: Number of images (int >= 0).
            generator: CPU generator (reproducible draws) or ``None`` (global RNG).

        Raises:
            ParameterError: ``n`` < 0 or the factory is not fitted.
        """
        check_int("n", n, minimum=0, type_error=False)
        t, shape = self._require_fitted()
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError("generator", "a torch.Generator or None", generator)
        if self._codec is not None:
            d = t["latent_mean"].numel()
            e = torch.randn((n, d), generator=generator)
            z = t["latent_mean"] + e @ t["latent_factor"].T
            return self._codec.decode(z).detach().cpu().float().reshape(n, *shape)
        k, d = t["components"].shape
        z = torch.randn((n, k), generator=generator)
        e = torch.randn((n, d), generator=generator)
        x = t["mean"] + (z * t["scales"]) @ t["components"] + t["residual_std"] * e
        return x.clamp(0.0, 1.0).reshape(n, *shape).float()

    @torch.no_grad()
    def log_likelihood(self, images: torch.Tensor) -> torch.Tensor:
        """Log density of each image under the fitted model (a membership score).

        Private-PCA mode: the probabilistic-PCA density of the flattened image
        in pixel space (before the sampler's clamping), with every variance
        floored at :data:`LIKELIHOOD_VARIANCE_FLOOR`.  Codec mode: the Gaussian
        density of the image's codec latent in latent space (no Jacobian
        term: the codec is fixed, so the omitted term does not depend on the
        factory and cancels in any comparison between factories).  Higher
        means "more typical of the training images"; the audit uses it as
        the likelihood attack's score.

        Args:
            images: float ``(N, C, H, W)`` in ``[0, 1]`` of the factory's shape.

        Returns:
            float64 CPU tensor ``(N,)``, in nats.

        Raises:
            ParameterError: Not fitted, or images of another shape.
        """
        t, shape = self._require_fitted()
        data = self._check_queries(images, shape)
        n = data.shape[0]
        if self._codec is not None:
            z = self._codec.encode(data).detach().cpu().double()
            factor = t["latent_factor"].double()
            values, vectors = torch.linalg.eigh(factor @ factor.T)
            floor = self._latent_floor(self._codec)
            values = values.clamp(min=floor)
            return _gaussian_log_density(
                z - t["latent_mean"].double(), vectors.T.contiguous(), values, floor
            )
        x = data.reshape(n, -1).double()
        comps = t["components"].double()
        rest = max(float(t["residual_std"].double()) ** 2, LIKELIHOOD_VARIANCE_FLOOR)
        variances = (t["scales"].double() ** 2 + rest).clamp(min=LIKELIHOOD_VARIANCE_FLOOR)
        return _gaussian_log_density(x - t["mean"].double(), comps, variances, rest)

    @torch.no_grad()
    def reconstruct(self, images: torch.Tensor) -> torch.Tensor:
        """Project images onto the factory's basis and back, clamped to ``[0, 1]``.

        Private-PCA mode: ``μ + V_kᵀ V_k (x − μ)`` with the *private* mean and
        principal directions, so the reconstruction error is a membership
        signal.  Codec mode: ``decode(encode(x))`` through the public codec,
        which does not depend on the client's data at all (useful only as a
        control: its error carries no membership signal about the factory).

        Args:
            images: float ``(N, C, H, W)`` in ``[0, 1]`` of the factory's shape.

        Returns:
            float32 CPU tensor ``(N, C, H, W)``.
        """
        t, shape = self._require_fitted()
        data = self._check_queries(images, shape)
        n = data.shape[0]
        if self._codec is not None:
            return self._codec.decode(self._codec.encode(data)).detach().cpu().float()
        x = data.reshape(n, -1).double()
        mean = t["mean"].double()
        comps = t["components"].double()
        x_hat = mean + ((x - mean) @ comps.T) @ comps
        return x_hat.clamp(0.0, 1.0).reshape(n, *shape).float()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The shipped tensors (copies on the CPU; never the codec).

        Private-PCA mode: ``mean`` (D,), ``components`` (k, D), ``scales``
        (k,), ``residual_std`` (1,).  Codec mode: ``latent_mean`` (d,) and
        ``latent_factor`` (d, d) with ``factor·factorᵀ = Σ``.

        Raises:
            ParameterError: The factory is not fitted.
        """
        if self._tensors is None:
            raise not_fitted_error()
        return {k: v.clone() for k, v in self._tensors.items()}

    def _manifest_configs(
        self, tensors: Mapping[str, torch.Tensor]
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        # The basis and, in codec mode, the codec's fingerprint.
        architecture: dict[str, Any] = {"latent_dim": self.latent_dim, "basis": self.basis}
        if self._codec is None:
            architecture["fitted_dim"] = int(tensors["scales"].numel())
            method = "probabilistic-pca-ml"
        else:
            architecture["codec"] = {
                "type": type(self._codec).__name__,
                "fingerprint": self._codec_fingerprint,
            }
            dp_fit = self.dp is not None or self._release is not None
            method = "latent-gaussian-dp-moments" if dp_fit else "latent-gaussian-mle"
        training: dict[str, Any] = {"method": method}
        if self.dp is not None:
            training["dp"] = self.dp.to_dict()
        return architecture, training

    @classmethod
    def load(cls, directory: str | Path, *, codec: Codec | None = None) -> LatentGaussianFactory:
        """Load a factory saved by :meth:`save`, verifying both checksums first.

        Args:
            directory: Directory written by :meth:`save`.
            codec: For a codec-mode factory, the same public codec it was
                fitted with (checked against the manifest's fingerprint);
                must be ``None`` for a private-PCA factory.

        Raises:
            ArtifactIntegrityError: Missing file, checksum mismatch, malformed
                manifest or tensors, another factory type, or a codec whose
                fingerprint differs from the manifest's.
            ParameterError: A codec-mode factory loaded without a codec, or a
                private-PCA factory loaded with one.
        """
        if codec is not None and not isinstance(codec, Codec):
            raise ParameterTypeError("codec", "a privfed.engines.codecs.Codec or None", codec)
        manifest, tensors = cls._load_checked(directory)
        arch = manifest.architecture
        basis = arch.get("basis", "private-pca")
        if basis not in ("private-pca", "public-codec"):
            raise ArtifactIntegrityError("manifest.json", "malformed architecture")
        if basis == "public-codec" and codec is None:
            raise ParameterError("codec", "the public codec this factory was fitted with", "None")
        if basis == "private-pca" and codec is not None:
            raise ParameterError("codec", "None for a private-PCA factory", type(codec).__name__)
        try:
            latent_dim = int(arch["latent_dim"])
            factory = cls(
                latent_dim=latent_dim,
                class_id=manifest.class_id,
                client_id=manifest.client_id,
                codec=codec,
            )
            expected_print = None if codec is None else str(arch["codec"]["fingerprint"])
        except (KeyError, TypeError, ValueError):
            raise ArtifactIntegrityError("manifest.json", "malformed architecture") from None
        if expected_print is not None and expected_print != factory._codec_fingerprint:
            raise ArtifactIntegrityError("manifest.json", "codec does not match")
        c, h, w = manifest.image_shape
        d = c * h * w
        if codec is not None:
            if (c, h, w) != tuple(codec.image_shape):
                raise ArtifactIntegrityError("manifest.json", "codec does not match")
            names: tuple[str, ...] = _CODEC_TENSOR_NAMES
            shapes_ok = set(tensors) == set(names) and (
                tuple(tensors["latent_mean"].shape) == (latent_dim,)
                and tuple(tensors["latent_factor"].shape) == (latent_dim, latent_dim)
            )
        else:
            names = _TENSOR_NAMES
            shapes_ok = set(tensors) == set(names)
            if shapes_ok:
                k = tensors["scales"].numel()
                shapes_ok = (
                    tuple(tensors["mean"].shape) == (d,)
                    and tuple(tensors["components"].shape) == (k, d)
                    and tuple(tensors["residual_std"].shape) == (1,)
                )
        if not shapes_ok:
            raise ArtifactIntegrityError("weights.safetensors", "tensors do not match")
        factory._tensors = {name: tensors[name].float() for name in names}
        return factory._set_loaded(manifest)
