"""A Gaussian-mixture factory in a public codec's latent space (hard assignment).

One factory per (class, client) cell, as
:class:`~privfed.engines.factory.gaussian.LatentGaussianFactory` in codec
mode, but with ``k`` Gaussian components instead of one, so that a class with
several shapes (a 7 with and without a bar) is not averaged into
one blur.  The components are seeded by *public anchors*: ``k`` latent points
computed from the public split of the class (:func:`public_anchors`, k-means
on the public latents; ``k`` from the public rule :func:`anchor_count`), known
to the server and never derived from private data.

**Fit without DP.**  Every latent is assigned to its nearest anchor, then
``em_iterations`` rounds of hard EM (k-means: means recomputed, records
reassigned) refine the assignment locally; each component is the sample mean
and covariance of its records, its weight their share.  Deterministic.

**Fit with DP** (``dp=`` a :class:`~privfed.engines.factory.gaussian.LatentGaussianDP`).
No EM (it would read the records more than once).  Each latent is clipped to
the codec's public radius ``R`` and assigned to its nearest anchor ``a(z) =
argmin_j ‖z − anchor_j‖`` (ties to the lowest index): the assignment is a
function of the record alone and of public data.  The release is, for every
component ``j``, the noisy count, sum and second moment

    ñ_j = n_j + N(0, σ_c²),  S̃_j = Σ_{a(z)=j} z + N(0, σ_s² I_d),
    M̃_j = Σ_{a(z)=j} z zᵀ + N(0, σ_m² I_{d²}).

*Sensitivity.*  Adjacency is replace-one within the cell (its size ``n``
ships in the manifest; the per-component counts do not).  Replace record
``x`` (latent ``z``, component ``j``) by ``x'`` (``z'``, ``j'``), with
``‖z‖, ‖z'‖ <= R`` after clipping.  Either ``j = j'``: only component ``j``
changes, by ``(z' − z, z'z'ᵀ − zzᵀ, 0)`` -- the single-Gaussian replace case;
or ``j ≠ j'``: component ``j`` changes by ``(−z, −zzᵀ, −1)`` and ``j'`` by
``(z', z'z'ᵀ, +1)``, no other component moves.  Whitened by the noise stds,
the squared change is in the first case at most the same-class value and in
the second at most ``2R²/σ_s² + 2R⁴/σ_m² + 2/σ_c²`` -- exactly the two cases
of :func:`privfed.dp.sensitivity.joint_mu_squared` with ``private_labels=True``
(components play the classes).  So the whole release (all components at
once) is a Gaussian mechanism with the μ of
:func:`~privfed.engines.moments.planning.plan_latent_release`
``(…, private_labels=True)``, and that plan sets the three stds.  Weights,
means and covariances are post-processing: ``w_j ∝ max(ñ_j, 0)``, ``m_j =
S̃_j / max(ñ_j, 1)`` projected into the ball of radius ``R``, ``Σ_j = M̃_j /
max(ñ_j, 1) − m_j m_jᵀ`` with eigenvalues clamped to ``[floor, R²]``.  The
privacy record says ``mechanism="gaussian"`` with the whitened multiplier
``1/μ`` (rounded up), so :func:`~privfed.engines.factory.record_in_ledger`
enters the cell as one Gaussian release in the ``"cell"`` scheme.  As in the
Gaussian factory, sums are float64 and noise continuous floating point
(Mironov's 2012 floating-point attack is not accounted for).

Unlearning: the factory is a deterministic function of its cell's records
(and, under DP, of the cell's noise stream), so the matrix's column removal
is bit-identical to never registering it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from privfed._checks import check_int
from privfed.engines.codecs.base import Codec
from privfed.engines.factory.base import (
    ClientId,
    FactoryBase,
    PrivacyRecord,
    not_fitted_error,
    validate_images,
)
from privfed.engines.factory.gaussian import LatentGaussianDP, codec_fingerprint
from privfed.engines.factory.privacy import release_from_record
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError

__all__ = [
    "MIXTURE_DOMAIN",
    "LatentMixtureFactory",
    "anchor_count",
    "assign_to_anchors",
    "clip_latents",
    "mixture_statistics",
    "public_anchors",
    "release_plan",
]

#: The seeded-noise derivation of the mixture factory's cells (see
#: :mod:`privfed.engines.moments.noise`).
MIXTURE_DOMAIN = (b"latent-mixture-dp|", b"|")

_TENSOR_NAMES = ("weights", "means", "factors")
_FLOOR_FRACTION = 1e-3
_CLIP_TARGET = 1.0 - 2.0**-20
#: Public images per component in :func:`anchor_count`.
_IMAGES_PER_ANCHOR = 6


def anchor_count(public_count: int, max_components: int) -> int:
    """The public rule for ``k``: one component per 6 public images of the class, in [1, max]."""
    check_int("public_count", public_count, minimum=1, expected=None)
    check_int("max_components", max_components, minimum=1, expected=None)
    return max(1, min(max_components, public_count // _IMAGES_PER_ANCHOR))


def assign_to_anchors(z: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Index of the nearest anchor (L2, ties to the lowest index) of each row of ``z``."""
    dist = ((z[:, None, :] - anchors[None, :, :]) ** 2).sum(axis=-1)
    return np.asarray(dist.argmin(axis=1), dtype=np.int64)


def _kmeans(z: np.ndarray, centres: np.ndarray, iterations: int) -> np.ndarray:
    """Hard EM from ``centres``: the final assignment (an empty centre keeps its place)."""
    centres = centres.copy()
    labels = assign_to_anchors(z, centres)
    for _ in range(iterations):
        for j in range(centres.shape[0]):
            if (labels == j).any():
                centres[j] = z[labels == j].mean(axis=0)
        new = assign_to_anchors(z, centres)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def public_anchors(codec: Codec, public_images: torch.Tensor, max_components: int) -> torch.Tensor:
    """``k`` anchors (float64 ``(k, d)``) from PUBLIC images of one class.

    ``k = anchor_count(len(public_images), max_components)``; k-means (20
    rounds) on the public latents, started from ``k`` latents spread by index
    (deterministic).  The anchors depend on public data only.
    """
    data = validate_images(public_images, "public_images")
    z = codec.encode(data).detach().cpu().double().numpy()
    k = anchor_count(z.shape[0], max_components)
    start = z[np.linspace(0, z.shape[0] - 1, k).round().astype(np.int64)]
    labels = _kmeans(z, start, 20)
    centres = np.stack(
        [z[labels == j].mean(axis=0) if (labels == j).any() else start[j] for j in range(k)]
    )
    return torch.from_numpy(centres)


def clip_latents(z: np.ndarray, radius: float) -> np.ndarray:
    """Rows of ``z`` scaled into the ball of radius ``R·(1 − 2⁻²⁰)`` (float64)."""
    norms = np.linalg.norm(z, axis=1)
    target = radius * _CLIP_TARGET
    scale = np.where(norms > target, target / np.maximum(norms, 1e-300), 1.0)
    return np.asarray(z * scale[:, None], dtype=np.float64)


def mixture_statistics(
    z: np.ndarray, labels: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-component counts ``(k,)``, sums ``(k, d)`` and second moments ``(k, d, d)``."""
    one_hot = np.zeros((z.shape[0], k))
    one_hot[np.arange(z.shape[0]), labels] = 1.0
    counts = one_hot.sum(axis=0)
    sums = one_hot.T @ z
    second = np.einsum("nj,na,nb->jab", one_hot, z, z)
    return counts, sums, second


def _components(
    counts: np.ndarray, sums: np.ndarray, second: np.ndarray, floor: float, cap: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, means and covariance factors from (possibly noisy) statistics."""
    k, d = sums.shape
    denom = np.maximum(counts, 1.0)
    means = sums / denom[:, None]
    if cap is not None:  # the clipped latents lie in the ball of radius sqrt(cap)
        norms = np.linalg.norm(means, axis=1)
        limit = math.sqrt(cap)
        means = means * np.where(norms > limit, limit / np.maximum(norms, 1e-300), 1.0)[:, None]
    factors = np.zeros((k, d, d))
    for j in range(k):
        cov = second[j] / denom[j] - np.outer(means[j], means[j])
        values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
        values = np.maximum(values, floor)
        if cap is not None:
            values = np.minimum(values, cap)
        factors[j] = vectors * np.sqrt(values)
    weights = np.maximum(counts, 0.0)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(k, 1.0 / k)
    return weights, means, factors


@functools.lru_cache(maxsize=16)
def release_plan(epsilon: float, delta: float, radius: float, dim: int) -> Any:
    """The cell's private-labels plan (cached: the planner searches, and cells share targets)."""
    from privfed.dp import Adjacency
    from privfed.engines.moments.planning import plan_latent_release

    return plan_latent_release(
        epsilon,
        delta,
        clip_norm=radius,
        dim=dim,
        adjacency=Adjacency.REPLACE_ONE,
        private_labels=True,
    )


class LatentMixtureFactory(FactoryBase):
    """A hard-assignment Gaussian mixture per (class, client) in a public codec's latent space.

    See the module docstring for the fit with and without DP and the
    sensitivity argument.  Shipped values: ``k + k·d + k·d²``.

    Args:
        codec: The frozen public codec (never shipped; its fingerprint is in
            the manifest).
        anchors: Public anchors, ``(k, d)`` (:func:`public_anchors`).
        class_id: Class the factory generates.
        client_id: Client that trains it.
        dp: A :class:`LatentGaussianDP` target, or ``None`` (no formal guarantee).
        em_iterations: Rounds of local hard EM without DP (int >= 0, default
            10); ignored under DP (one release, nearest-anchor assignment).

    Raises:
        ParameterTypeError: ``codec`` not a codec, ``dp`` not a target,
            ``anchors`` not a tensor.
        ParameterError: ``anchors`` of the wrong shape or not finite.
    """

    factory_type: ClassVar[str] = "latent-mixture"

    def __init__(
        self,
        *,
        codec: Codec,
        anchors: torch.Tensor,
        class_id: int | None = None,
        client_id: ClientId | None = None,
        dp: LatentGaussianDP | None = None,
        em_iterations: int = 10,
    ) -> None:
        if not isinstance(codec, Codec):
            raise ParameterTypeError("codec", "a privfed.engines.codecs.Codec", codec)
        if dp is not None and not isinstance(dp, LatentGaussianDP):
            raise ParameterTypeError("dp", "a LatentGaussianDP or None", dp)
        if not isinstance(anchors, torch.Tensor):
            raise ParameterTypeError("anchors", "a torch.Tensor (k, d)", anchors)
        d = int(codec.latent_dim)
        if anchors.ndim != 2 or anchors.shape[0] < 1 or anchors.shape[1] != d:
            raise ParameterError("anchors", f"a (k, {d}) tensor with k >= 1", tuple(anchors.shape))
        if not bool(torch.isfinite(anchors).all()):
            raise ParameterError("anchors", "finite values", "non-finite values")
        self.em_iterations = check_int("em_iterations", em_iterations, minimum=0, expected=None)
        self.dp = dp
        self._codec = codec
        self._codec_fingerprint = codec_fingerprint(codec)
        self._anchors = anchors.detach().cpu().double().clone()
        self._init_identity(class_id, client_id)
        self._tensors: dict[str, torch.Tensor] | None = None

    def __repr__(self) -> str:
        return self._repr_with(f"components={self.components}, dp={self.dp is not None}")

    @property
    def components(self) -> int:
        """Number ``k`` of mixture components (the anchors' count)."""
        return int(self._anchors.shape[0])

    @property
    def codec(self) -> Codec:
        """The public codec."""
        return self._codec

    def _floor(self) -> float:
        r = float(self._codec.default_clip_norm)
        return _FLOOR_FRACTION * r * r / self._codec.latent_dim

    def _parameter_tensors(self) -> list[torch.Tensor]:
        if self._tensors is None:
            raise not_fitted_error()
        return list(self._tensors.values())

    def fit(self, images: torch.Tensor) -> LatentMixtureFactory:
        """Fit to one client's images of one class (float ``(N, C, H, W)`` in [0, 1]).

        Returns:
            ``self``.  A failed call leaves the factory unchanged.

        Raises:
            ParameterError, ParameterTypeError, NonFiniteInputError: Bad images
                or images of another shape than the codec's.
        """
        data = validate_images(images)
        n, c, h, w = data.shape
        if (c, h, w) != tuple(self._codec.image_shape):
            raise ParameterError(
                "images", f"images of the codec's shape {tuple(self._codec.image_shape)}", (c, h, w)
            )
        z = self._codec.encode(data).detach().cpu().double().numpy()
        anchors = self._anchors.numpy()
        k = anchors.shape[0]
        privacy: PrivacyRecord | None = None
        if self.dp is None:
            labels = _kmeans(z, anchors, self.em_iterations)
            counts, sums, second = mixture_statistics(z, labels, k)
            weights, means, factors = _components(counts, sums, second, self._floor(), None)
        else:
            weights, means, factors, privacy = self._dp_fit(z, anchors)
        self._tensors = {
            "weights": torch.from_numpy(weights).float(),
            "means": torch.from_numpy(means).float().contiguous(),
            "factors": torch.from_numpy(np.ascontiguousarray(factors)).float(),
        }
        self._image_shape = (c, h, w)
        self._sample_count = n
        release = (
            None
            if privacy is None
            else release_from_record(
                privacy, name=self.release_name, partition=self.release_partition
            )
        )
        self._set_release(release, None if privacy is None else privacy.clip_norm)
        return self

    def _dp_fit(
        self, z: np.ndarray, anchors: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, PrivacyRecord]:
        """One Gaussian release of clipped per-component moments (module docstring)."""
        from privfed.dp import GAUSSIAN_SAMPLER
        from privfed.engines.factory.gaussian import _stream_seed
        from privfed.engines.moments.noise import add_gaussian

        dp = self.dp
        assert dp is not None  # noqa: S101 -- the caller checked
        radius = float(self._codec.default_clip_norm)
        k, d = anchors.shape
        plan = release_plan(float(dp.epsilon), float(dp.delta), radius, int(d))
        x = clip_latents(z, radius)
        counts, sums, second = mixture_statistics(x, assign_to_anchors(x, anchors), k)
        seed = _stream_seed(dp.seed)
        counts = add_gaussian(counts, plan.noise_std_count, seed, "c", domain=MIXTURE_DOMAIN)
        sums = add_gaussian(sums, plan.noise_std_sum, seed, "s", domain=MIXTURE_DOMAIN)
        second = add_gaussian(
            second, plan.noise_std_second_moment, seed, "m", domain=MIXTURE_DOMAIN
        )
        weights, means, factors = _components(counts, sums, second, self._floor(), radius**2)
        record = PrivacyRecord(
            mechanism="gaussian",
            noise_multiplier=math.nextafter(1.0 / plan.mu, math.inf),
            clip_norm=radius,
            sampling_rate=1.0,
            steps=1,
            seeded=dp.seed is not None,
            sampler=GAUSSIAN_SAMPLER,
        )
        return weights, means, factors, record

    def _require(self) -> tuple[dict[str, torch.Tensor], tuple[int, int, int]]:
        if self._tensors is None or self._image_shape is None:
            raise not_fitted_error()
        return self._tensors, self._image_shape

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` images: float32 CPU ``(n, C, H, W)`` in [0, 1].

        The component of each draw is categorical with the weights, then a
        Gaussian draw in latent space is decoded.
        """
        check_int("n", n, minimum=0, type_error=False)
        t, shape = self._require()
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError("generator", "a torch.Generator or None", generator)
        if n == 0:
            return torch.zeros((0, *shape))
        which = torch.multinomial(t["weights"].double(), n, replacement=True, generator=generator)
        e = torch.randn((n, t["means"].shape[1]), generator=generator)
        z = t["means"][which] + torch.einsum("nab,nb->na", t["factors"][which], e)
        return self._codec.decode(z).detach().cpu().float().reshape(n, *shape)

    @torch.no_grad()
    def log_likelihood(self, images: torch.Tensor) -> torch.Tensor:
        """Mixture log density of each image's codec latent (nats, float64 ``(N,)``).

        The membership score of the audit's likelihood attack (no Jacobian
        term: the codec is fixed and public).
        """
        t, shape = self._require()
        data = validate_images(images)
        if tuple(data.shape[1:]) != shape:
            raise ParameterError(
                "images", f"images of the factory's shape {shape}", tuple(data.shape[1:])
            )
        z = self._codec.encode(data).detach().cpu().double()
        d = z.shape[1]
        floor = self._floor()
        terms = []
        for j in range(t["weights"].numel()):
            factor = t["factors"][j].double()
            values, vectors = torch.linalg.eigh(factor @ factor.T)
            values = values.clamp(min=floor)
            proj = (z - t["means"][j].double()) @ vectors
            quad = (proj**2 / values).sum(dim=1)
            log_norm = -0.5 * (d * math.log(2.0 * math.pi) + torch.log(values).sum())
            weight = float(t["weights"][j])
            terms.append(math.log(max(weight, 1e-300)) + log_norm - 0.5 * quad)
        return torch.logsumexp(torch.stack(terms, dim=1), dim=1)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """``weights`` (k,), ``means`` (k, d), ``factors`` (k, d, d) (copies; never the codec)."""
        t, _ = self._require()
        return {k: v.clone() for k, v in t.items()}

    def _manifest_configs(
        self, tensors: Mapping[str, torch.Tensor]
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        architecture = {
            "latent_dim": int(self._codec.latent_dim),
            "components": self.components,
            "codec": {"type": type(self._codec).__name__, "fingerprint": self._codec_fingerprint},
            "anchors": self._anchors.flatten().tolist(),
        }
        dp_fit = self.dp is not None or self.release is not None
        training: dict[str, Any] = {
            "method": "latent-mixture-dp-moments" if dp_fit else "latent-mixture-hard-em",
            "em_iterations": 0 if dp_fit else self.em_iterations,
        }
        if self.dp is not None:
            training["dp"] = self.dp.to_dict()
        return architecture, training

    @classmethod
    def load(cls, directory: str | Path, *, codec: Codec) -> LatentMixtureFactory:
        """Load a saved mixture factory with the codec it was fitted with (checksums first).

        Raises:
            ArtifactIntegrityError: Bad files, another factory type, malformed
                tensors, or a codec whose fingerprint differs.
        """
        if not isinstance(codec, Codec):
            raise ParameterTypeError("codec", "a privfed.engines.codecs.Codec", codec)
        manifest, tensors = cls._load_checked(directory)
        arch = manifest.architecture
        try:
            k, d = int(arch["components"]), int(arch["latent_dim"])
            anchors = torch.tensor(arch["anchors"], dtype=torch.float64).reshape(k, d)
            fingerprint = str(arch["codec"]["fingerprint"])
            em = int(manifest.training.get("em_iterations", 0))
        except (KeyError, TypeError, ValueError, RuntimeError):
            raise ArtifactIntegrityError("manifest.json", "malformed architecture") from None
        if d != codec.latent_dim or tuple(manifest.image_shape) != tuple(codec.image_shape):
            raise ArtifactIntegrityError("manifest.json", "codec does not match")
        factory = cls(
            codec=codec,
            anchors=anchors,
            class_id=manifest.class_id,
            client_id=manifest.client_id,
            em_iterations=max(em, 0),
        )
        if fingerprint != factory._codec_fingerprint:
            raise ArtifactIntegrityError("manifest.json", "codec does not match")
        shapes = {"weights": (k,), "means": (k, d), "factors": (k, d, d)}
        if set(tensors) != set(_TENSOR_NAMES) or any(
            tuple(tensors[name].shape) != shape for name, shape in shapes.items()
        ):
            raise ArtifactIntegrityError("weights.safetensors", "tensors do not match")
        factory._tensors = {name: tensors[name].float() for name in _TENSOR_NAMES}
        return factory._set_loaded(manifest)
