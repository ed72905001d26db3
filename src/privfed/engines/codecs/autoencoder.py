"""A small convolutional autoencoder trained on public images in seconds on a CPU."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from privfed._checks import check_int
from privfed.engines._rng import seeded_global_rng
from privfed.engines._training import Adam, train_epochs
from privfed.engines.codecs.base import check_images, check_latents
from privfed.errors import ParameterError

__all__ = ["ConvAutoencoderCodec"]


class _Net(nn.Module):
    def __init__(self, channels: int, height: int, width: int, latent_dim: int) -> None:
        super().__init__()
        self.grid = (height // 2, width // 2)
        hidden = 32 * self.grid[0] * self.grid[1]
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(hidden, latent_dim),
        )
        self.decoder_in = nn.Linear(latent_dim, hidden)
        self.decoder = nn.Sequential(
            nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, channels, 3, padding=1),
            nn.Sigmoid(),
        )

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        h = self.decoder_in(z).reshape(z.shape[0], 32, *self.grid)
        out: torch.Tensor = self.decoder(h)
        return out


class ConvAutoencoderCodec:
    """A convolutional autoencoder with normalised latents.

    Trained on PUBLIC images only (:meth:`fit`).  After training, the latents
    are standardised with the public latents' per-coordinate mean and std, so
    the codec's latent prior is (marginally) standard normal by construction;
    for ``z ~ N(0, I_d)``, ``‖z‖²`` concentrates at ``d``, so
    ``default_clip_norm = sqrt(d)`` (the typical-set radius; about half of the
    records get clipped slightly).  No private data is involved.

    Use :meth:`fit` to build one; image height and width must be even.
    """

    def __init__(
        self,
        net: _Net,
        image_shape: tuple[int, int, int],
        latent_dim: int,
        shift: torch.Tensor,
        scale: torch.Tensor,
    ) -> None:
        self._net = net.eval()
        self._image_shape = image_shape
        self._latent_dim = latent_dim
        self._shift = shift
        self._scale = scale

    def __repr__(self) -> str:
        return (
            f"ConvAutoencoderCodec(image_shape={self._image_shape}, latent_dim={self._latent_dim})"
        )

    @classmethod
    def fit(
        cls,
        public_images: torch.Tensor,
        *,
        latent_dim: int,
        epochs: int = 60,
        batch_size: int = 64,
        learning_rate: float = 3e-3,
        seed: int = 0,
        progress: Callable[[int, int, float], None] | None = None,
    ) -> ConvAutoencoderCodec:
        """Train on public images (deterministic for a seed on CPU).

        Args:
            public_images: ``float32`` ``(N, C, H, W)`` in ``[0, 1]``, PUBLIC data;
                ``H`` and ``W`` even.
            latent_dim: ``d >= 1``.
            epochs: Training epochs ``>= 1``.
            batch_size: Mini-batch size ``>= 1``.
            learning_rate: Adam step size ``> 0``.
            seed: Seed of initialisation and shuffling.
            progress: Optional ``(epoch, epochs, loss)`` callback.
        """
        shape = tuple(int(s) for s in public_images.shape[1:])
        if len(shape) != 3 or shape[1] % 2 or shape[2] % 2:
            raise ParameterError("public_images", "images (N, C, H, W) with even H and W", shape)
        images = check_images(public_images, shape)
        for name, value in (
            ("latent_dim", latent_dim),
            ("epochs", epochs),
            ("batch_size", batch_size),
        ):
            check_int(name, value, minimum=1, type_error=False)
        if not math.isfinite(learning_rate) or learning_rate <= 0:
            raise ParameterError("learning_rate", "a finite float > 0", learning_rate)
        if images.shape[0] < 2:
            raise ParameterError("public_images", "at least 2 images", images.shape[0])
        with seeded_global_rng(seed):
            net = _Net(shape[0], shape[1], shape[2], latent_dim)
            optimiser = Adam(net.parameters(), lr=learning_rate)

            def reconstruction_loss(idx: torch.Tensor) -> torch.Tensor:
                x = images[idx]
                return nn.functional.mse_loss(net.decode(net.encoder(x)), x)

            train_epochs(
                reconstruction_loss,
                optimiser,
                images.shape[0],
                epochs=epochs,
                batch_size=batch_size,
                shuffler=torch.Generator().manual_seed(seed),
                progress=progress,
            )
        net.eval()
        with torch.no_grad():
            raw = net.encoder(images)
        shift = raw.mean(dim=0)
        scale = raw.std(dim=0).clamp_min(1e-6)
        return cls(net, shape, latent_dim, shift, scale)

    @property
    def latent_dim(self) -> int:
        """``d``."""
        return self._latent_dim

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)``."""
        return self._image_shape

    @property
    def default_clip_norm(self) -> float:
        """``sqrt(d)``: typical radius of the standardised latent prior."""
        return math.sqrt(self._latent_dim)

    @torch.no_grad()
    def encode(self, images: torch.Tensor, *, batch_size: int = 4096) -> torch.Tensor:
        """``float32 (N, C, H, W)`` in ``[0, 1]`` -> standardised ``float32 (N, d)`` (CPU)."""
        x = check_images(images, self._image_shape).cpu()
        parts = [
            (self._net.encoder(x[i : i + batch_size]) - self._shift) / self._scale
            for i in range(0, x.shape[0], batch_size)
        ]
        return torch.cat(parts) if parts else torch.zeros(0, self._latent_dim)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, *, batch_size: int = 4096) -> torch.Tensor:
        """Standardised ``(N, d)`` latents -> ``float32 (N, C, H, W)`` in ``[0, 1]`` (CPU)."""
        z = check_latents(latents, self._latent_dim).cpu()
        parts = [
            self._net.decode(z[i : i + batch_size] * self._scale + self._shift)
            for i in range(0, z.shape[0], batch_size)
        ]
        if not parts:
            return torch.zeros(0, *self._image_shape)
        return torch.cat(parts).clamp(0.0, 1.0)
