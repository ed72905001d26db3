"""The codec contract shared by every latent encoder/decoder.

A codec is *frozen and public*: it is fitted or downloaded without private data
and then used unchanged by every client (encode) and by the server (decode).
Its ``default_clip_norm`` must be justified without private data, from the
codec's construction or its public fitting data; each codec documents how.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from privfed.errors import NonFiniteInputError, ParameterError, ParameterTypeError

__all__ = ["Codec", "check_images", "check_latents"]


@runtime_checkable
class Codec(Protocol):
    """A frozen map between images and flat latent vectors.

    Attributes:
        latent_dim: ``d``, the length of one latent vector.
        image_shape: ``(C, H, W)`` of the images it encodes and decodes.
        default_clip_norm: A clipping radius ``R`` (L2, latent units) chosen
            without private data.
    """

    @property
    def latent_dim(self) -> int:
        """``d``."""
        ...

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        ...

    @property
    def default_clip_norm(self) -> float:
        """Data-independent (or public-data) clipping radius."""
        ...

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Map ``float32 (N, C, H, W)`` images in ``[0, 1]`` to ``float32 (N, d)`` latents."""
        ...

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Map ``(N, d)`` latents to ``float32 (N, C, H, W)`` images clamped to ``[0, 1]``."""
        ...


def check_images(images: object, image_shape: tuple[int, int, int]) -> torch.Tensor:
    """Validate an image batch for a codec; return it as ``float32``."""
    if not isinstance(images, torch.Tensor) or not images.is_floating_point():
        raise ParameterTypeError("images", "a floating-point torch.Tensor", images)
    if images.ndim != 4 or tuple(images.shape[1:]) != tuple(image_shape):
        raise ParameterError(
            "images",
            f"a tensor of shape (N, {', '.join(map(str, image_shape))})",
            tuple(images.shape),
        )
    if images.numel() and not bool(torch.isfinite(images).all()):
        raise NonFiniteInputError("images", count=int((~torch.isfinite(images)).sum()))
    return images.to(torch.float32)


def check_latents(latents: object, latent_dim: int) -> torch.Tensor:
    """Validate a latent batch for a codec; return it as ``float32``."""
    if not isinstance(latents, torch.Tensor) or not latents.is_floating_point():
        raise ParameterTypeError("latents", "a floating-point torch.Tensor", latents)
    if latents.ndim != 2 or latents.shape[1] != latent_dim:
        raise ParameterError(
            "latents", f"a tensor of shape (N, {latent_dim})", tuple(latents.shape)
        )
    if latents.numel() and not bool(torch.isfinite(latents).all()):
        raise NonFiniteInputError("latents", count=int((~torch.isfinite(latents)).sum()))
    return latents.to(torch.float32)
