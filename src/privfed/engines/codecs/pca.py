"""A linear (PCA) codec fitted on public images."""

from __future__ import annotations

import math

import numpy as np
import torch

from privfed.engines.codecs.base import check_images, check_latents
from privfed.errors import ParameterError

__all__ = ["PCACodec"]


class PCACodec:
    """Principal-component codec: ``z = Vᵀ (x − μ)``, ``x̂ = clamp(μ + V z, 0, 1)``.

    Fitted on PUBLIC images only (:meth:`fit`).  Because ``V`` has orthonormal
    columns, ``‖z‖ <= ‖x − μ‖ <= sqrt(C H W)`` for images in ``[0, 1]``: a
    data-independent bound (:attr:`norm_bound`).  It is loose, so the default
    clip norm is instead a quantile (default the median) of the *public*
    latents' norms, which trades a clipping bias on the largest records for
    much less noise; it never looks at private data.

    Args:
        mean: ``float32`` ``(C, H, W)`` public mean image.
        components: ``float32`` ``(C*H*W, d)`` orthonormal columns.
        clip_norm: The default clip norm (latent units), finite ``> 0``.
    """

    def __init__(self, mean: torch.Tensor, components: torch.Tensor, clip_norm: float) -> None:
        if components.ndim != 2 or components.shape[0] != mean.numel():
            raise ParameterError(
                "components", f"a ({mean.numel()}, d) matrix", tuple(components.shape)
            )
        if not math.isfinite(clip_norm) or clip_norm <= 0:
            raise ParameterError("clip_norm", "a finite float > 0", clip_norm)
        self._mean = mean.detach().to(torch.float32).clone()
        self._components = components.detach().to(torch.float32).clone()
        self._clip_norm = float(clip_norm)

    def __repr__(self) -> str:
        return f"PCACodec(image_shape={self.image_shape}, latent_dim={self.latent_dim})"

    @classmethod
    def fit(
        cls, public_images: torch.Tensor, *, latent_dim: int, clip_quantile: float = 0.5
    ) -> PCACodec:
        """Fit on public images.

        Args:
            public_images: ``float32`` ``(N, C, H, W)`` in ``[0, 1]``, PUBLIC data.
            latent_dim: ``d`` in ``[1, min(N, C H W)]``.
            clip_quantile: Quantile in ``(0, 1]`` of public latent norms used
                as :attr:`default_clip_norm`.
        """
        images = check_images(public_images, tuple(public_images.shape[1:]))  # type: ignore[arg-type]
        n = images.shape[0]
        flat = images.reshape(n, -1).to(torch.float64)
        if isinstance(latent_dim, bool) or not isinstance(latent_dim, int):
            raise ParameterError("latent_dim", "an int", latent_dim)
        if not 1 <= latent_dim <= min(n, flat.shape[1]):
            raise ParameterError(
                "latent_dim", f"an int in [1, {min(n, flat.shape[1])}]", latent_dim
            )
        if not 0.0 < clip_quantile <= 1.0:
            raise ParameterError("clip_quantile", "a float in (0, 1]", clip_quantile)
        mean = flat.mean(dim=0)
        _, _, vh = torch.linalg.svd(flat - mean, full_matrices=False)
        components = vh[:latent_dim].T
        # Fix the sign of each component so the fit is deterministic.
        signs = torch.sign(components[components.abs().argmax(dim=0), torch.arange(latent_dim)])
        components = components * torch.where(signs == 0, 1.0, signs)
        norms = ((flat - mean) @ components).norm(dim=1).cpu().numpy()
        clip = float(np.quantile(norms, clip_quantile))
        return cls(mean.reshape(images.shape[1:]), components, clip if clip > 0 else 1.0)

    @property
    def latent_dim(self) -> int:
        """``d``."""
        return int(self._components.shape[1])

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        c, h, w = self._mean.shape
        return (int(c), int(h), int(w))

    @property
    def default_clip_norm(self) -> float:
        """Quantile of public latent norms (see the class docstring)."""
        return self._clip_norm

    @property
    def norm_bound(self) -> float:
        """``sqrt(C H W)``: a data-independent bound on ``‖z‖`` for images in ``[0, 1]``."""
        return math.sqrt(self._mean.numel())

    @torch.no_grad()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """``float32 (N, C, H, W)`` in ``[0, 1]`` -> ``float32 (N, d)`` (on the input's device)."""
        x = check_images(images, self.image_shape)
        dev = x.device
        flat = x.reshape(x.shape[0], -1) - self._mean.reshape(1, -1).to(dev)
        return flat @ self._components.to(dev)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """``(N, d)`` -> ``float32 (N, C, H, W)`` clamped to ``[0, 1]``."""
        z = check_latents(latents, self.latent_dim)
        dev = z.device
        flat = z @ self._components.T.to(dev) + self._mean.reshape(1, -1).to(dev)
        return flat.clamp(0.0, 1.0).reshape(z.shape[0], *self.image_shape)
