"""A diffusion factory in the EDM formulation on a diffusers ``UNet2DModel``.

EDM (Karras, Aittala, Aila, Laine 2022, arXiv:2206.00364):

* Preconditioning (§5, Table 1): the denoiser is
  ``D(x; σ) = c_skip(σ)·x + c_out(σ)·F(c_in(σ)·x; c_noise(σ))`` with
  ``c_skip = σ_d² / (σ² + σ_d²)``, ``c_out = σ·σ_d / sqrt(σ² + σ_d²)``,
  ``c_in = 1 / sqrt(σ² + σ_d²)``, ``c_noise = ln(σ) / 4``; ``F`` is the UNet.
* Training (§5): ``ln σ ~ N(P_mean, P_std²)``, loss
  ``λ(σ)·‖D(y + σ·n; σ) − y‖²`` with ``λ = (σ² + σ_d²) / (σ·σ_d)²``.
* Sampling (Algorithm 1, deterministic, S_churn = 0): second-order Heun steps
  on the probability-flow ODE over the noise levels
  ``σ_i = (σ_max^{1/ρ} + i/(N−1)·(σ_min^{1/ρ} − σ_max^{1/ρ}))^ρ``, then 0.

Images in ``[0, 1]`` are mapped to ``[−1, 1]`` (so σ_d = 0.5 is the natural
data scale) and back, clamped, after sampling.

Padding: a UNet with ``B`` resolution levels halves the image ``B − 1``
times, so height and width must be multiples of ``2^(B−1)``.  Smaller or odd
sizes are padded at the bottom/right with the background value (0 in
``[0, 1]``, i.e. −1 after scaling) up to the next multiple, and generated
images are cropped back.  8×8 digits need no padding with 2–4 levels.

The default configuration (two levels of 16/32 channels, one ResNet layer
per level, no attention: 0.16 M parameters, 0.64 MB of float32 weights)
takes about 0.14 s per step of 64 images on one CPU thread, so the default
400 steps train one 8×8-digit factory in about a minute; larger images and
GPUs are a matter of configuration (:class:`UNetConfig`,
``EDMTrainingConfig.device``).  On small CPU machines, run torch on one
intra-op thread (``torch.set_num_threads(1)``): with several threads on a
loaded machine a step of this tiny model can be tens of times slower.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from privfed._checks import check_bool, check_float, check_int, check_optional_int
from privfed.engines._rng import seeded_global_rng
from privfed.engines.factory.base import (
    ClientId,
    FactoryBase,
    not_fitted_error,
    validate_images,
)
from privfed.engines.factory.dpsgd import DPSGDConfig, GaussianNoiseSource, dp_sgd_step
from privfed.engines.factory.privacy import FactoryRelease, release_from_record
from privfed.errors import (
    ArtifactIntegrityError,
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
)

__all__ = ["EDMConfig", "EDMDiffusionFactory", "EDMTrainingConfig", "UNetConfig", "edm_sigmas"]


@dataclass(frozen=True)
class UNetConfig:
    """Architecture of the diffusers ``UNet2DModel`` inside the factory.

    Attributes:
        block_out_channels: Channels per resolution level (each >= 1 and a
            multiple of ``norm_num_groups``); the number of levels ``B`` sets
            the padding multiple ``2^(B−1)``.
        layers_per_block: ResNet layers per level (>= 1).
        norm_num_groups: Groups of every GroupNorm (>= 1).
        attention: Put self-attention in every level but the first (as the
            DDPM UNet does); off by default for speed on tiny images.
        attention_head_dim: Channels per attention head (>= 1).
    """

    block_out_channels: tuple[int, ...] = (16, 32)
    layers_per_block: int = 1
    norm_num_groups: int = 8
    attention: bool = False
    attention_head_dim: int = 8

    def __post_init__(self) -> None:
        channels = tuple(self.block_out_channels)
        object.__setattr__(self, "block_out_channels", channels)
        if not channels:
            raise ParameterError("block_out_channels", "a non-empty tuple of ints", channels)
        check_int("norm_num_groups", self.norm_num_groups, minimum=1, expected=None)
        for c in channels:
            check_int("block_out_channels", c, minimum=1, expected=None)
            if c % self.norm_num_groups:
                raise ParameterError(
                    "block_out_channels",
                    f"multiples of norm_num_groups={self.norm_num_groups}",
                    channels,
                )
        check_int("layers_per_block", self.layers_per_block, minimum=1, expected=None)
        check_int("attention_head_dim", self.attention_head_dim, minimum=1, expected=None)
        check_bool("attention", self.attention)

    @property
    def size_multiple(self) -> int:
        """Height and width must be multiples of this (``2^(levels − 1)``)."""
        return int(2 ** (len(self.block_out_channels) - 1))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        data = asdict(self)
        data["block_out_channels"] = list(self.block_out_channels)
        return data


@dataclass(frozen=True)
class EDMConfig:
    """EDM noise schedule, loss and sampler constants (arXiv:2206.00364, Table 1).

    Attributes:
        sigma_data: Standard deviation of the (scaled) data, > 0.
        sigma_min: Smallest sampling noise level, > 0.
        sigma_max: Largest sampling noise level, > ``sigma_min``.
        rho: Schedule curvature, > 0.
        p_mean: Mean of ln σ during training.
        p_std: Standard deviation of ln σ during training, > 0.
        sampling_steps: Number of noise levels N of the Heun sampler (>= 2);
            the network is evaluated ``2N − 1`` times per sample.
    """

    sigma_data: float = 0.5
    sigma_min: float = 0.002
    sigma_max: float = 80.0
    rho: float = 7.0
    p_mean: float = -1.2
    p_std: float = 1.2
    sampling_steps: int = 18

    def __post_init__(self) -> None:
        for name in ("sigma_data", "sigma_min", "sigma_max", "rho", "p_std"):
            check_float(
                name,
                getattr(self, name),
                low=0,
                open_low=True,
                numpy=False,
                expected="a finite float",
            )
        check_float("p_mean", self.p_mean, numpy=False, expected="a finite float")
        if self.sigma_max <= self.sigma_min:
            raise ParameterError(
                "sigma_max", f"a float > sigma_min={self.sigma_min}", self.sigma_max
            )
        check_int("sampling_steps", self.sampling_steps, minimum=2, expected=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return asdict(self)


@dataclass(frozen=True)
class EDMTrainingConfig:
    """How a diffusion factory is trained.

    Attributes:
        steps: Optimizer steps (>= 1).
        batch_size: Records per step without DP (>= 1; sampled with
            replacement-free shuffling per epoch).  Ignored under DP-SGD,
            where Poisson sampling with ``dp.sampling_rate`` sets the batch.
        learning_rate: Adam learning rate, > 0.
        seed: Seed of weight initialisation, batch order, σ and noise draws
            (and of the DP noise, which then is *not* cryptographically
            secure; the privacy record says so).  ``None`` draws a fresh
            seed from the OS and the DP noise from a CSPRNG.
        device: Torch device string for training and sampling (``"cpu"``,
            ``"cuda"``, ``"cuda:1"``).
        dp: DP-SGD parameters, or ``None`` for non-private training.
        sample_batch_size: Images generated per network call when sampling
            (>= 1); bounds memory, does not change the result.
    """

    steps: int = 400
    batch_size: int = 64
    learning_rate: float = 2e-3
    seed: int | None = None
    device: str = "cpu"
    dp: DPSGDConfig | None = None
    sample_batch_size: int = 512

    def __post_init__(self) -> None:
        check_int("steps", self.steps, minimum=1, expected=None)
        check_int("batch_size", self.batch_size, minimum=1, expected=None)
        check_float(
            "learning_rate",
            self.learning_rate,
            low=0,
            open_low=True,
            numpy=False,
            expected="a finite float",
        )
        check_optional_int("seed", self.seed, minimum=0, expected=None)
        if not isinstance(self.device, str):
            raise ParameterTypeError("device", "a torch device string", self.device)
        try:
            torch.device(self.device)
        except RuntimeError:
            raise ParameterError("device", "a valid torch device string", self.device) from None
        if self.dp is not None and not isinstance(self.dp, DPSGDConfig):
            raise ParameterTypeError("dp", "a DPSGDConfig or None", self.dp)
        check_int("sample_batch_size", self.sample_batch_size, minimum=1, expected=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (the seed is reported only as seeded or not)."""
        return {
            "steps": self.steps,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "seeded": self.seed is not None,
            "device": self.device,
            "dp": None if self.dp is None else self.dp.to_dict(),
            "sample_batch_size": self.sample_batch_size,
        }


def edm_sigmas(config: EDMConfig, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Noise levels of the Heun sampler: ``N`` decreasing values then a final 0.

    Returns:
        Tensor of shape ``(N + 1,)``; element 0 is ``sigma_max``, element
        ``N − 1`` is ``sigma_min`` and element ``N`` is 0.
    """
    n = config.sampling_steps
    i = torch.arange(n, dtype=torch.float64)
    inv = 1.0 / config.rho
    sig = (
        config.sigma_max**inv + i / (n - 1) * (config.sigma_min**inv - config.sigma_max**inv)
    ) ** config.rho
    return torch.cat([sig, torch.zeros(1, dtype=torch.float64)]).to(dtype)


class EDMDiffusionFactory(FactoryBase):
    """Per-(class, client) EDM diffusion model on a small diffusers UNet.

    Args:
        unet: Architecture.
        edm: Schedule, loss and sampler constants.
        training: Training configuration (steps, batch, learning rate, seed,
            device, optional DP-SGD).
        class_id: Class the factory generates (written into the manifest).
        client_id: Client that trains it (written into the manifest).

    Example:
        >>> f = EDMDiffusionFactory(training=EDMTrainingConfig(steps=2, seed=0))
        >>> _ = f.fit(torch.rand(8, 1, 8, 8))
        >>> f.sample(3, torch.Generator().manual_seed(1)).shape
        torch.Size([3, 1, 8, 8])
    """

    factory_type: ClassVar[str] = "edm-diffusion"

    def __init__(
        self,
        *,
        unet: UNetConfig | None = None,
        edm: EDMConfig | None = None,
        training: EDMTrainingConfig | None = None,
        class_id: int | None = None,
        client_id: ClientId | None = None,
    ) -> None:
        for name, value, kind in (
            ("unet", unet, UNetConfig),
            ("edm", edm, EDMConfig),
            ("training", training, EDMTrainingConfig),
        ):
            if value is not None and not isinstance(value, kind):
                raise ParameterTypeError(name, f"a {kind.__name__} or None", value)
        self.unet_config = unet if unet is not None else UNetConfig()
        self.edm = edm if edm is not None else EDMConfig()
        self.training = training if training is not None else EDMTrainingConfig()
        self._init_identity(class_id, client_id)
        self._model: Any = None
        self.loss_history: list[float] = []

    def __repr__(self) -> str:
        state = "fitted" if self.is_fitted else "unfitted"
        return (
            f"EDMDiffusionFactory(class_id={self.class_id!r}, client_id={self.client_id!r}, "
            f"{state}, parameters={self.num_parameters})"
        )

    # -- construction ------------------------------------------------------------

    def _padded_hw(self, h: int, w: int) -> tuple[int, int]:
        m = self.unet_config.size_multiple
        return (-(-h // m) * m, -(-w // m) * m)

    def _build(self, channels: int, height: int, width: int, init_seed: int) -> Any:
        from diffusers.models.unets.unet_2d import UNet2DModel

        cfg = self.unet_config
        levels = len(cfg.block_out_channels)
        down = ["DownBlock2D"] + ["AttnDownBlock2D" if cfg.attention else "DownBlock2D"] * (
            levels - 1
        )
        up = ["AttnUpBlock2D" if cfg.attention else "UpBlock2D"] * (levels - 1) + ["UpBlock2D"]
        ph, pw = self._padded_hw(height, width)
        # Initialise under a private RNG state so the caller's global torch RNG
        # is neither consumed nor reset.
        with seeded_global_rng(init_seed):
            model = UNet2DModel(
                sample_size=(ph, pw),
                in_channels=channels,
                out_channels=channels,
                down_block_types=tuple(down),
                up_block_types=tuple(up),
                block_out_channels=cfg.block_out_channels,
                layers_per_block=cfg.layers_per_block,
                norm_num_groups=cfg.norm_num_groups,
                attention_head_dim=cfg.attention_head_dim,
                add_attention=cfg.attention,
                time_embedding_type="positional",
            )
        return model.to(self.training.device)

    # -- EDM ---------------------------------------------------------------------

    def _denoise(
        self, model: Any, x: torch.Tensor, sigma: torch.Tensor, params: Any = None
    ) -> torch.Tensor:
        """EDM-preconditioned denoiser D(x; σ) on padded, scaled images ``(B, C, H, W)``."""
        sd = self.edm.sigma_data
        s = sigma.reshape(-1, 1, 1, 1)
        c_skip = sd**2 / (s**2 + sd**2)
        c_out = s * sd / (s**2 + sd**2).sqrt()
        c_in = 1.0 / (s**2 + sd**2).sqrt()
        c_noise = sigma.reshape(-1).log() / 4.0
        if params is None:
            f_x = model(c_in * x, c_noise, return_dict=False)[0]
        else:
            from torch.func import functional_call

            f_x = functional_call(model, params, (c_in * x, c_noise), {"return_dict": False})[0]
        denoised: torch.Tensor = c_skip * x + c_out * f_x
        return denoised

    def _loss_weight(self, sigma: torch.Tensor) -> torch.Tensor:
        sd = self.edm.sigma_data
        return (sigma**2 + sd**2) / (sigma * sd) ** 2

    def _to_model_space(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        ph, pw = self._padded_hw(h, w)
        x = images * 2.0 - 1.0
        if (ph, pw) != (h, w):
            x = torch.nn.functional.pad(x, (0, pw - w, 0, ph - h), value=-1.0)
        return x

    # -- Factory protocol ----------------------------------------------------------

    def _parameter_tensors(self) -> list[torch.Tensor]:
        # The UNet's weights (its buffers are shipped too but are not parameters).
        return list(self._model.parameters())

    def fit(self, images: torch.Tensor) -> EDMDiffusionFactory:
        """Train from scratch on one client's images of one class.

        Args:
            images: float tensor ``(N, C, H, W)``, values in ``[0, 1]``, N >= 1.
                Any device; copied to ``training.device``.

        Returns:
            ``self``.  Calling ``fit`` again retrains from scratch.

        Raises:
            ParameterError, ParameterTypeError, NonFiniteInputError: Bad images.
        """
        data_cpu = validate_images(images)
        cfg = self.training
        seed = cfg.seed if cfg.seed is not None else secrets.randbits(62)
        device = torch.device(cfg.device)
        n, c, h, w = data_cpu.shape
        model = self._build(c, h, w, seed)
        data = self._to_model_space(data_cpu).to(device)
        gen = torch.Generator(device="cpu").manual_seed(seed + 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
        history: list[float] = []
        model.train()
        if cfg.dp is None:
            order = torch.randperm(n, generator=gen)
            cursor = 0
            for _ in range(cfg.steps):
                if cursor + min(cfg.batch_size, n) > n:
                    order, cursor = torch.randperm(n, generator=gen), 0
                idx = order[cursor : cursor + min(cfg.batch_size, n)]
                cursor += idx.numel()
                y = data[idx.to(device)]
                sigma = (
                    torch.randn(y.shape[0], generator=gen) * self.edm.p_std + self.edm.p_mean
                ).exp()
                sigma = sigma.to(device)
                noise = torch.randn(y.shape, generator=gen).to(device)
                denoised = self._denoise(model, y + sigma.view(-1, 1, 1, 1) * noise, sigma)
                per = (denoised - y).pow(2).flatten(1).mean(dim=1)
                loss = (self._loss_weight(sigma) * per).mean()
                optimizer.zero_grad(set_to_none=True)
                torch.autograd.backward(loss)
                optimizer.step()
                history.append(float(loss.detach()))
            release: FactoryRelease | None = None
        else:
            dp = cfg.dp
            noise_source = GaussianNoiseSource(
                torch.Generator(device="cpu").manual_seed(seed + 2)
                if cfg.seed is not None
                else None
            )
            buffers = dict(model.named_buffers())
            pixels = int(data[0].numel())
            shape = tuple(data.shape[1:])

            def draw_aux(count: int) -> torch.Tensor:
                # Column 0: ln σ ~ N(P_mean, P_std²); the rest: the noise image.
                log_sigma = torch.randn(count, 1, generator=gen) * self.edm.p_std + self.edm.p_mean
                eps = torch.randn(count, pixels, generator=gen)
                return torch.cat([log_sigma, eps], dim=1).to(device)

            def per_example_loss(
                params: dict[str, torch.Tensor], x: torch.Tensor, aux: torch.Tensor
            ) -> torch.Tensor:
                sigma = aux[:1].exp()
                eps = aux[1:].reshape(1, *shape)
                y = x.unsqueeze(0)
                noisy = y + sigma.view(1, 1, 1, 1) * eps
                den = self._denoise(model, noisy, sigma, {**params, **buffers})
                return (self._loss_weight(sigma) * (den - y).pow(2).mean()).sum()

            for _ in range(cfg.steps):
                dp_sgd_step(
                    model,
                    per_example_loss,
                    data,
                    dp,
                    optimizer,
                    batch_generator=gen,
                    noise=noise_source,
                    draw_aux=draw_aux,
                )
            release = release_from_record(
                dp.privacy_record(cfg.steps, noise=noise_source),
                name=self.release_name,
                partition=self.release_partition,
            )
        model.eval()
        # Commit only after training succeeded, so a failed fit leaves the
        # factory as it was.
        self._model = model
        self._image_shape = (c, h, w)
        self._sample_count = n
        self._set_release(release, None if cfg.dp is None else cfg.dp.clip_norm)
        self.loss_history = history
        return self

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Generate ``n`` images with the deterministic Heun sampler.

        Args:
            n: Number of images (>= 0).
            generator: CPU ``torch.Generator`` for the initial noise; the
                sampler is otherwise deterministic, so a seeded generator
                reproduces the images exactly on the same device.
                ``None`` uses torch's global RNG.

        Returns:
            float32 CPU tensor ``(n, C, H, W)`` with values in ``[0, 1]``.

        Raises:
            ParameterError: ``n`` < 0 or the factory is not fitted.
        """
        check_int("n", n, minimum=0, expected=None)
        if self._model is None or self._image_shape is None:
            raise not_fitted_error()
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError("generator", "a torch.Generator or None", generator)
        c, h, w = self._image_shape
        ph, pw = self._padded_hw(h, w)
        device = torch.device(self.training.device)
        model = self._model
        sigmas = edm_sigmas(self.edm).to(device)
        # All initial noise is drawn at once so that the result does not depend
        # on how the batch is chunked.
        start_noise = torch.randn((n, c, ph, pw), generator=generator, dtype=torch.float64)
        chunks = []
        for start in range(0, n, self.training.sample_batch_size):
            m = min(self.training.sample_batch_size, n - start)
            x = start_noise[start : start + m].to(device) * sigmas[0]
            for i in range(self.edm.sampling_steps):
                t_cur, t_next = sigmas[i], sigmas[i + 1]
                d = (x - self._denoise_eval(model, x, t_cur, m)) / t_cur
                x_next = x + (t_next - t_cur) * d
                if i < self.edm.sampling_steps - 1:
                    d2 = (x_next - self._denoise_eval(model, x_next, t_next, m)) / t_next
                    x_next = x + (t_next - t_cur) * (0.5 * d + 0.5 * d2)
                x = x_next
            chunks.append(((x[:, :, :h, :w] + 1.0) / 2.0).clamp(0.0, 1.0).float().cpu())
        if not chunks:
            return torch.zeros((0, c, h, w), dtype=torch.float32)
        return torch.cat(chunks)

    def _denoise_eval(
        self, model: Any, x: torch.Tensor, sigma: torch.Tensor, m: int
    ) -> torch.Tensor:
        # The network runs in float32; the ODE state is kept in float64 so the
        # Heun updates do not lose precision at small σ.
        s = sigma.float().expand(m)
        return self._denoise(model, x.float(), s).double()

    @torch.no_grad()
    def denoise(self, noisy_images: torch.Tensor, noise_std: float) -> torch.Tensor:
        """The trained EDM denoiser ``D(x; σ)`` in image units (a membership-audit hook).

        ``noisy_images`` are ``x + noise_std·n`` for clean images ``x`` in
        ``[0, 1]`` and ``n ~ N(0, I)``; the result is the model's estimate of
        ``x``.  Internally images live in ``[−1, 1]`` (``y = 2x − 1``), so the
        network is queried at ``σ = 2·noise_std``; padding (see the module
        docstring) uses the noiseless background value and is cropped away.
        Usable as the ``denoise`` callable of
        :func:`privfed.audit.denoising_loss_scores` after conversion to numpy
        (:func:`privfed.engines.factory.audit.numpy_denoiser`).

        Args:
            noisy_images: float tensor ``(B, C, H, W)`` of the factory's image
                shape; any finite values (noise takes them outside ``[0, 1]``).
            noise_std: Standard deviation of the added noise in image units
                (pixels in ``[0, 1]``), finite and ``> 0``.

        Returns:
            float32 CPU tensor ``(B, C, H, W)``, not clamped.

        Raises:
            ParameterError: Not fitted, bad shape, or bad ``noise_std``.
            NonFiniteInputError: ``noisy_images`` holds NaN or infinity.
        """
        if self._model is None or self._image_shape is None:
            raise not_fitted_error()
        check_float(
            "noise_std", noise_std, low=0, open_low=True, numpy=False, expected="a finite float"
        )
        if not isinstance(noisy_images, torch.Tensor) or not noisy_images.is_floating_point():
            raise ParameterTypeError("noisy_images", "a floating-point torch.Tensor", noisy_images)
        c, h, w = self._image_shape
        if noisy_images.ndim != 4 or tuple(noisy_images.shape[1:]) != (c, h, w):
            raise ParameterError(
                "noisy_images", f"a tensor of shape (B, {c}, {h}, {w})", tuple(noisy_images.shape)
            )
        bad = int((~torch.isfinite(noisy_images)).sum())
        if bad:
            raise NonFiniteInputError("noisy_images", count=bad)
        device = torch.device(self.training.device)
        if noisy_images.shape[0] == 0:
            return torch.zeros((0, c, h, w), dtype=torch.float32)
        y = self._to_model_space(noisy_images.detach().float().cpu()).to(device)
        sigma = torch.full((y.shape[0],), 2.0 * float(noise_std), device=device)
        out = self._denoise(self._model, y, sigma)
        return ((out[:, :, :h, :w] + 1.0) / 2.0).float().cpu()

    # -- persistence -------------------------------------------------------------

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The UNet's state dict on the CPU (what is shipped).

        Raises:
            ParameterError: The factory is not fitted.
        """
        if self._model is None:
            raise not_fitted_error()
        return {k: v.detach().cpu().contiguous() for k, v in self._model.state_dict().items()}

    def _manifest_configs(
        self, tensors: Mapping[str, torch.Tensor]
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        architecture = {"unet": self.unet_config.to_dict(), "edm": self.edm.to_dict()}
        return architecture, self.training.to_dict()

    @classmethod
    def load(cls, directory: str | Path, *, device: str = "cpu") -> EDMDiffusionFactory:
        """Load a factory saved by :meth:`save`, verifying both checksums first.

        Args:
            directory: Directory written by :meth:`save`.
            device: Device to place the model on.

        Raises:
            ArtifactIntegrityError: Missing file, checksum mismatch, malformed
                manifest, or a manifest of another factory type.
        """
        manifest, tensors = cls._load_checked(directory)
        try:
            arch = manifest.architecture
            unet = UNetConfig(
                **{**arch["unet"], "block_out_channels": tuple(arch["unet"]["block_out_channels"])}
            )
            edm = EDMConfig(**arch["edm"])
            tr = dict(manifest.training)
            dp = None if tr.get("dp") is None else DPSGDConfig(**tr["dp"])
            training = EDMTrainingConfig(
                steps=tr["steps"],
                batch_size=tr["batch_size"],
                learning_rate=tr["learning_rate"],
                device=device,
                dp=dp,
                sample_batch_size=tr["sample_batch_size"],
            )
        except (KeyError, TypeError, ValueError):
            raise ArtifactIntegrityError("manifest.json", "malformed architecture") from None
        factory = cls(
            unet=unet,
            edm=edm,
            training=training,
            class_id=manifest.class_id,
            client_id=manifest.client_id,
        )
        c, h, w = manifest.image_shape
        model = factory._build(c, h, w, 0)
        try:
            model.load_state_dict(tensors, strict=True)
        except RuntimeError:
            raise ArtifactIntegrityError("weights.safetensors", "tensors do not match") from None
        model.eval()
        factory._model = model
        return factory._set_loaded(manifest)
