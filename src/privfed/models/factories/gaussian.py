"""A cheap factory: a Gaussian in a low-dimensional linear latent space (probabilistic PCA).

The factory fits probabilistic PCA (Tipping & Bishop 1999) to one client's
images of one class, flattened to ``D = C·H·W`` values:

    x = μ + Wz + ε,   z ~ N(0, I_k),   ε ~ N(0, s² I_D),

with ``μ`` the mean image, ``W = V_kᵀ·diag(sqrt(λ_i − s²))`` from the top
``k`` principal directions ``V_k`` and variances ``λ_i``, and ``s²`` the mean
of the discarded variances (the maximum-likelihood solution).  Sampling
draws ``x`` and clamps it to ``[0, 1]``.  It is the linear stand-in for the
latent engine's codec + class Gaussian: the PCA basis plays the codec, the
diagonal latent Gaussian the class model.

Shipped values: ``D + k·D + k + 1``.  No privacy: the mean and principal
directions are deterministic functions of the images (with one image the
factory reproduces it), so use it only where the matrix's unlearning, not
differential privacy, is the requirement.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch

import privfed
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError
from privfed.models.factories.base import (
    ClientId,
    FactoryManifest,
    PrivacyRecord,
    load_verified_tensors,
    save_factory,
    tensors_sha256,
    validate_class_id,
    validate_client_id,
    validate_images,
)

__all__ = ["LatentGaussianFactory"]

_TENSOR_NAMES = ("mean", "components", "scales", "residual_std")


class LatentGaussianFactory:
    """Probabilistic-PCA Gaussian per (class, client): fits in milliseconds.

    Args:
        latent_dim: Number ``k`` of principal directions kept (int >= 1); the
            fit uses ``min(latent_dim, N − 1, D)``.
        class_id: Class the factory generates (written into the manifest).
        client_id: Client that trains it (written into the manifest).
    """

    factory_type: ClassVar[str] = "latent-gaussian"

    def __init__(
        self,
        *,
        latent_dim: int = 16,
        class_id: int | None = None,
        client_id: ClientId | None = None,
    ) -> None:
        if isinstance(latent_dim, bool) or not isinstance(latent_dim, int):
            raise ParameterTypeError("latent_dim", "an int >= 1", latent_dim)
        if latent_dim < 1:
            raise ParameterError("latent_dim", "an int >= 1", latent_dim)
        self.latent_dim = latent_dim
        self.class_id = None if class_id is None else validate_class_id(class_id)
        self.client_id = None if client_id is None else validate_client_id(client_id)
        self._tensors: dict[str, torch.Tensor] | None = None
        self._image_shape: tuple[int, int, int] | None = None
        self._sample_count = 0

    def __repr__(self) -> str:
        state = "fitted" if self.is_fitted else "unfitted"
        return (
            f"LatentGaussianFactory(class_id={self.class_id!r}, client_id={self.client_id!r}, "
            f"latent_dim={self.latent_dim}, {state})"
        )

    @property
    def is_fitted(self) -> bool:
        """Whether the factory has been fitted or loaded."""
        return self._tensors is not None

    @property
    def num_parameters(self) -> int:
        """Number of scalar values shipped (0 before fitting)."""
        if self._tensors is None:
            return 0
        return int(sum(t.numel() for t in self._tensors.values()))

    @property
    def sample_count(self) -> int:
        """Number of real images fitted on (0 before fitting)."""
        return self._sample_count

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """``(C, H, W)`` of generated images, ``None`` before fitting."""
        return self._image_shape

    @property
    def privacy(self) -> PrivacyRecord:
        """Always ``mechanism="none"``: this factory has no formal guarantee."""
        return PrivacyRecord()

    def fit(self, images: torch.Tensor) -> LatentGaussianFactory:
        """Fit probabilistic PCA to ``images`` (float ``(N, C, H, W)`` in ``[0, 1]``, N >= 1).

        Computation is in float64 on the CPU; deterministic.

        Returns:
            ``self``.
        """
        data = validate_images(images)
        n, c, h, w = data.shape
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
        self._tensors = {
            "mean": mean.float(),
            "components": components.float().contiguous(),
            "scales": scales.float(),
            "residual_std": residual.float(),
        }
        self._image_shape = (c, h, w)
        self._sample_count = n
        return self

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` images: float32 CPU tensor ``(n, C, H, W)`` in ``[0, 1]``.

        Args:
            n: Number of images (int >= 0).
            generator: CPU generator (reproducible draws) or ``None`` (global RNG).

        Raises:
            ParameterError: ``n`` < 0 or the factory is not fitted.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ParameterError("n", "an int >= 0", n)
        if self._tensors is None or self._image_shape is None:
            raise ParameterError("self", "a fitted factory (call fit or load first)", "unfitted")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError("generator", "a torch.Generator or None", generator)
        t = self._tensors
        k, d = t["components"].shape
        z = torch.randn((n, k), generator=generator)
        e = torch.randn((n, d), generator=generator)
        x = t["mean"] + (z * t["scales"]) @ t["components"] + t["residual_std"] * e
        return x.clamp(0.0, 1.0).reshape(n, *self._image_shape).float()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The shipped tensors (copies on the CPU).

        Raises:
            ParameterError: The factory is not fitted.
        """
        if self._tensors is None:
            raise ParameterError("self", "a fitted factory (call fit or load first)", "unfitted")
        return {k: v.clone() for k, v in self._tensors.items()}

    def weights_sha256(self) -> str:
        """SHA-256 of the shipped tensors."""
        return tensors_sha256(self.state_tensors())

    def manifest(self) -> FactoryManifest:
        """Manifest of the fitted factory.

        Raises:
            ParameterError: The factory is not fitted.
        """
        tensors = self.state_tensors()
        shape = self._image_shape
        if shape is None:  # pragma: no cover -- set together with the tensors
            raise ParameterError("self", "a fitted factory", "unfitted")
        return FactoryManifest(
            factory_type=self.factory_type,
            class_id=self.class_id,
            client_id=self.client_id,
            sample_count=self._sample_count,
            image_shape=shape,
            architecture={
                "latent_dim": self.latent_dim,
                "fitted_dim": int(tensors["scales"].numel()),
            },
            training={"method": "probabilistic-pca-ml"},
            privacy=self.privacy,
            library_version=privfed.__version__,
            weights_sha256=tensors_sha256(tensors),
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and a checksummed ``manifest.json``."""
        return save_factory(directory, self.state_tensors(), self.manifest())

    @classmethod
    def load(cls, directory: str | Path) -> LatentGaussianFactory:
        """Load a factory saved by :meth:`save`, verifying both checksums first.

        Raises:
            ArtifactIntegrityError: Missing file, checksum mismatch, malformed
                manifest or tensors, or another factory type.
        """
        manifest, tensors = load_verified_tensors(directory)
        if manifest.factory_type != cls.factory_type:
            raise ArtifactIntegrityError("manifest.json", "factory type mismatch")
        try:
            factory = cls(
                latent_dim=int(manifest.architecture["latent_dim"]),
                class_id=manifest.class_id,
                client_id=manifest.client_id,
            )
        except (KeyError, TypeError, ValueError):
            raise ArtifactIntegrityError("manifest.json", "malformed architecture") from None
        c, h, w = manifest.image_shape
        d = c * h * w
        if set(tensors) != set(_TENSOR_NAMES):
            raise ArtifactIntegrityError("weights.safetensors", "tensors do not match")
        k = tensors["scales"].numel()
        shapes_ok = (
            tuple(tensors["mean"].shape) == (d,)
            and tuple(tensors["components"].shape) == (k, d)
            and tuple(tensors["residual_std"].shape) == (1,)
        )
        if not shapes_ok:
            raise ArtifactIntegrityError("weights.safetensors", "tensors do not match")
        factory._tensors = {name: tensors[name].float() for name in _TENSOR_NAMES}
        factory._image_shape = (c, h, w)
        factory._sample_count = manifest.sample_count
        return factory
