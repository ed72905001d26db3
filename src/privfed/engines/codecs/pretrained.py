"""A codec backed by a pretrained diffusers autoencoder (AutoencoderTiny, KL or DC).

The model is loaded with ``from_pretrained`` from a local directory or a hub
id (a hub id needs network access the first time; everything after that is
the same code path).  Latents ``(c, h, w)`` are flattened to ``d = c h w``
after the model's own normalisation ``z ↦ (z − shift_factor) · scaling_factor``
is applied, which is what the model's authors chose to give the latents
(approximately) unit variance per coordinate.
"""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Any

import torch

from privfed.engines.codecs.base import check_images, check_latents
from privfed.errors import ParameterError

__all__ = ["DiffusersCodec", "DiffusersKind"]


class DiffusersKind(enum.StrEnum):
    """Which diffusers autoencoder class to load."""

    AUTO = "auto"
    TINY = "tiny"
    KL = "kl"
    DC = "dc"


_CLASS_NAMES = {
    DiffusersKind.TINY: "AutoencoderTiny",
    DiffusersKind.KL: "AutoencoderKL",
    DiffusersKind.DC: "AutoencoderDC",
}


def _detect_kind(path: str | Path, subfolder: str | None) -> DiffusersKind:
    import json

    config = Path(path) / (subfolder or "") / "config.json"
    if config.is_file():
        name = json.loads(config.read_text()).get("_class_name", "")
        for kind, cls_name in _CLASS_NAMES.items():
            if name == cls_name:
                return kind
    raise ParameterError(
        "kind", "given explicitly when the config does not name a supported class", str(path)
    )


class DiffusersCodec:
    """Frozen pretrained diffusers autoencoder as a :class:`~privfed.engines.codecs.Codec`.

    Clip norm: with the model's scaling the latents have roughly unit variance
    per coordinate, so ``‖z‖ ≈ sqrt(d)``; ``default_clip_norm = 2 sqrt(d)``
    leaves room for non-centred latents.  It depends only on the public
    model's construction, never on private data.

    Grayscale images are repeated to the model's input channels on encode and
    averaged back on decode.  Use :meth:`from_pretrained` to build one.
    """

    def __init__(
        self,
        model: Any,
        kind: DiffusersKind,
        image_shape: tuple[int, int, int],
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        self._model = model.eval().requires_grad_(False).to(device)
        self._kind = kind
        self._image_shape = image_shape
        self._device = torch.device(device)
        config = model.config
        self._scaling = float(getattr(config, "scaling_factor", 1.0) or 1.0)
        shift = getattr(config, "shift_factor", None)
        self._shift = float(shift) if shift is not None else 0.0
        self._model_channels = int(config.in_channels)
        with torch.no_grad():
            probe = self._raw_encode(torch.zeros(1, *image_shape))
        self._latent_shape = tuple(int(s) for s in probe.shape[1:])

    def __repr__(self) -> str:
        return (
            f"DiffusersCodec(kind={self._kind.value!r}, image_shape={self._image_shape}, "
            f"latent_shape={self._latent_shape})"
        )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        *,
        image_shape: tuple[int, int, int],
        kind: DiffusersKind | str = DiffusersKind.AUTO,
        subfolder: str | None = None,
        device: str | torch.device = "cpu",
    ) -> DiffusersCodec:
        """Load an autoencoder with diffusers' ``from_pretrained``.

        Args:
            name_or_path: A local directory (``save_pretrained`` output) or a hub id.
            image_shape: ``(C, H, W)`` of the images to encode; ``H`` and ``W``
                must be compatible with the model's downsampling.
            kind: The class; ``"auto"`` reads ``_class_name`` from a local config.
            subfolder: Sub-directory holding the model (e.g. ``"vae"``).
            device: Where the model runs.
        """
        import diffusers

        try:
            wanted = DiffusersKind(kind)
        except ValueError:
            raise ParameterError(
                "kind", f"one of {[k.value for k in DiffusersKind]}", kind
            ) from None
        if wanted is DiffusersKind.AUTO:
            wanted = _detect_kind(name_or_path, subfolder)
        model_cls = getattr(diffusers, _CLASS_NAMES[wanted])
        kwargs: dict[str, Any] = {} if subfolder is None else {"subfolder": subfolder}
        model = model_cls.from_pretrained(str(name_or_path), **kwargs)
        return cls(model, wanted, tuple(int(s) for s in image_shape), device=device)  # type: ignore[arg-type]

    @property
    def latent_dim(self) -> int:
        """``d = c h w``."""
        return math.prod(self._latent_shape)

    @property
    def latent_shape(self) -> tuple[int, ...]:
        """``(c, h, w)`` of the model's latent."""
        return self._latent_shape

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        return self._image_shape

    @property
    def default_clip_norm(self) -> float:
        """``2 sqrt(d)`` (see the class docstring)."""
        return 2.0 * math.sqrt(self.latent_dim)

    def _raw_encode(self, images: torch.Tensor) -> torch.Tensor:
        x = images.to(self._device) * 2.0 - 1.0
        if x.shape[1] != self._model_channels:
            x = x.mean(dim=1, keepdim=True).expand(-1, self._model_channels, -1, -1)
        out = self._model.encode(x)
        if self._kind is DiffusersKind.KL:
            z = out.latent_dist.mode()
        elif self._kind is DiffusersKind.TINY:
            z = out.latents
        else:
            z = out.latent
        scaled: torch.Tensor = (z - self._shift) * self._scaling
        return scaled

    @torch.no_grad()
    def encode(self, images: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
        """``float32 (N, C, H, W)`` in ``[0, 1]`` -> ``float32 (N, d)`` on the CPU."""
        x = check_images(images, self._image_shape)
        parts = [
            self._raw_encode(x[i : i + batch_size]).reshape(-1, self.latent_dim).float().cpu()
            for i in range(0, x.shape[0], batch_size)
        ]
        return torch.cat(parts) if parts else torch.zeros(0, self.latent_dim)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
        """``(N, d)`` -> ``float32 (N, C, H, W)`` in ``[0, 1]`` on the CPU."""
        z = check_latents(latents, self.latent_dim)
        parts = []
        for i in range(0, z.shape[0], batch_size):
            chunk = z[i : i + batch_size].to(self._device).reshape(-1, *self._latent_shape)
            x = self._model.decode(chunk / self._scaling + self._shift).sample
            if x.shape[1] != self._image_shape[0]:
                x = x.mean(dim=1, keepdim=True)
            parts.append(((x + 1.0) / 2.0).clamp(0.0, 1.0).float().cpu())
        if not parts:
            return torch.zeros(0, *self._image_shape)
        return torch.cat(parts)
