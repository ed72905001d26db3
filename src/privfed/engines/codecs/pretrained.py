"""A codec backed by a pretrained diffusers autoencoder (AutoencoderTiny, KL or DC).

The model is loaded with ``from_pretrained`` from a local directory or a hub
id (a hub id needs network access the first time; everything after that is
the same code path).  The model class is always named by the caller
(:class:`DiffusersKind`); it is never guessed, and when the model's config
names its class the two must agree, so a directory or hub id can never be
loaded into the wrong architecture.

Latents ``(c, h, w)`` are flattened to ``d = c h w`` after the model's own
normalisation ``z ↦ (z − shift_factor) · scaling_factor`` is applied, which is
what the model's authors chose to give the latents (approximately) unit
variance per coordinate.

Image size.  An autoencoder that downsamples by ``f`` reproduces an image's
size only when its height and width are multiples of ``f`` (a KL model maps
27×27 to 26×26, a tiny one to 28×28).  The codec checks this when it is built
-- from the config before any weights are loaded, then by encoding and
decoding one blank probe image -- and refuses the size with a
:class:`~privfed.errors.ParameterError` naming ``image_shape``.

``diffusers`` is an optional dependency (``pip install 'privfed[engines]'``);
without it :meth:`DiffusersCodec.from_pretrained` raises a
:class:`~privfed.errors.ParameterError` naming ``codec`` that says so.
"""

from __future__ import annotations

import enum
import math
import os
import socket
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from privfed.engines.codecs.base import check_images, check_latents
from privfed.errors import ParameterError, ParameterTypeError

__all__ = ["INSTALL_HINT", "DiffusersCodec", "DiffusersKind", "downsampling_factor", "parse_kind"]

#: What to install for this codec.
INSTALL_HINT = "pip install 'privfed[engines]'"


class DiffusersKind(enum.StrEnum):
    """Which diffusers autoencoder class to load.

    Members:
        TINY: ``AutoencoderTiny`` (TAESD-style distilled autoencoders).
        KL: ``AutoencoderKL`` (Stable Diffusion style VAEs; the latent is the
            posterior mode).
        DC: ``AutoencoderDC`` (deep-compression autoencoders).
    """

    TINY = "tiny"
    KL = "kl"
    DC = "dc"


_CLASS_NAMES: dict[DiffusersKind, str] = {
    DiffusersKind.TINY: "AutoencoderTiny",
    DiffusersKind.KL: "AutoencoderKL",
    DiffusersKind.DC: "AutoencoderDC",
}

#: Config entry whose length ``L`` gives the downsampling factor ``2**(L-1)``.
_DOWNSAMPLING_KEYS: dict[DiffusersKind, str] = {
    DiffusersKind.TINY: "encoder_block_out_channels",
    DiffusersKind.KL: "block_out_channels",
    DiffusersKind.DC: "encoder_block_out_channels",
}

_KIND_DOMAIN = "one of 'tiny' (AutoencoderTiny), 'kl' (AutoencoderKL), 'dc' (AutoencoderDC)"


def parse_kind(kind: object) -> DiffusersKind:
    """Read a :class:`DiffusersKind` from a member, its value or its class name.

    Accepts ``"tiny"``, ``"kl"``, ``"dc"`` or ``"AutoencoderTiny"``,
    ``"AutoencoderKL"``, ``"AutoencoderDC"`` (any case).

    Raises:
        ParameterError: Named ``"kind"`` for anything else (``"auto"`` included:
            the kind is never guessed).
        ParameterTypeError: If ``kind`` is not a str.
    """
    if isinstance(kind, DiffusersKind):
        return kind
    if not isinstance(kind, str):
        raise ParameterTypeError("kind", _KIND_DOMAIN, kind)
    text = kind.strip().lower()
    for member, class_name in _CLASS_NAMES.items():
        if text in (member.value, class_name.lower()):
            return member
    detail = "the kind is never guessed; name the model's class" if text == "auto" else None
    raise ParameterError("kind", _KIND_DOMAIN, kind, detail=detail)


def _check_image_shape(image_shape: object) -> tuple[int, int, int]:
    if (
        not isinstance(image_shape, tuple | list)
        or len(image_shape) != 3
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in image_shape)
    ):
        raise ParameterTypeError("image_shape", "a (C, H, W) tuple of ints", image_shape)
    c, h, w = (int(s) for s in image_shape)
    if min(c, h, w) < 1:
        raise ParameterError("image_shape", "a (C, H, W) tuple of ints >= 1", image_shape)
    return (c, h, w)


def _import_diffusers(source: str) -> ModuleType:
    try:
        import diffusers
    except ImportError:
        raise ParameterError(
            "codec",
            "loadable: a diffusers autoencoder needs the optional 'diffusers' package",
            source,
            detail=f"it is not installed; install it with {INSTALL_HINT}",
        ) from None
    return diffusers


def _config_value(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):
        return config.get(key)
    return getattr(config, key, None)


def _shown(source: str) -> str:
    """A path or hub id shortened from the left to fit an error message."""
    return source if len(source) <= 70 else "..." + source[-67:]


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def downsampling_factor(kind: DiffusersKind | str, config: Any) -> int | None:
    """The spatial downsampling factor ``f`` a model's config implies, or ``None``.

    Args:
        kind: The model class.
        config: A model's ``config`` or the dict from ``load_config``.
    """
    blocks = _config_value(config, _DOWNSAMPLING_KEYS[parse_kind(kind)])
    if isinstance(blocks, list | tuple) and blocks:
        return int(2 ** (len(blocks) - 1))
    return None


def _size_hint(h: int, w: int, factor: int) -> str:
    """The nearest smaller and larger sizes whose sides are multiples of ``factor``."""
    lower = [(s // factor) * factor or factor for s in (h, w)]
    upper = [-(-s // factor) * factor for s in (h, w)]
    return f"{lower[0]}x{lower[1]} or {upper[0]}x{upper[1]}"


def _check_geometry(
    kind: DiffusersKind, config: Any, image_shape: tuple[int, int, int], model: str
) -> None:
    """Refuse, from the config alone, channels or a size the model cannot round-trip.

    ``model`` names the model in messages (``"the AutoencoderKL 'path'"``).
    """
    c, h, w = image_shape
    in_channels = _config_value(config, "in_channels")
    out_channels = _config_value(config, "out_channels") or in_channels
    if isinstance(in_channels, int) and c not in (1, in_channels):
        raise ParameterError(
            "image_shape",
            f"images with 1 or {in_channels} channels for {model}",
            image_shape,
        )
    if isinstance(out_channels, int) and c not in (1, out_channels):
        raise ParameterError(
            "image_shape",
            f"images with 1 or {out_channels} channels for {model} (its decoder's output channels)",
            image_shape,
        )
    factor = downsampling_factor(kind, config)
    if factor is not None and (h % factor or w % factor):
        raise ParameterError(
            "image_shape",
            f"(C, H, W) with H and W multiples of {factor} for {model}, "
            f"which downsamples by {factor}",
            image_shape,
            detail=f"{h}x{w} images would not decode to {h}x{w}; crop or resize them "
            f"to e.g. {_size_hint(h, w, factor)}",
        )


#: Seconds to wait for the hub's host before calling the network unreachable.
HUB_CONNECT_TIMEOUT = 3.0
_TRUE = ("1", "true", "yes", "on")


def hub_unreachable_reason() -> str | None:
    """Why the model hub cannot be reached now, or ``None`` when it can.

    ``HF_HUB_OFFLINE`` set to a true value counts as unreachable; otherwise one
    TCP connection to ``HF_ENDPOINT``'s host (default ``huggingface.co``) is
    tried for at most :data:`HUB_CONNECT_TIMEOUT` seconds.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return "HF_HUB_OFFLINE is set"
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    try:
        port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
        socket.create_connection((host, port), timeout=HUB_CONNECT_TIMEOUT).close()
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return f"no network connection to {host} ({why})"
    return None


def _in_hub_cache(repo_id: str, subfolder: str | None) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        filename = "config.json" if subfolder is None else f"{subfolder}/config.json"
        found = try_to_load_from_cache(repo_id, filename)
    except (ValueError, TypeError, OSError):  # not a valid repo id
        return False
    return isinstance(found, str)


def check_codec_source(name_or_path: str | Path, subfolder: str | None = None) -> None:
    """Fail fast when ``name_or_path`` is a hub id that cannot be fetched now.

    A local path, a hub id in the local hub cache, or a hub id while the hub
    is reachable passes; otherwise the error names the network and how to use
    a local directory instead (rather than retrying and blaming config.json).

    Raises:
        ParameterError (parameter ``codec``): A hub id, not cached, while the
            network is unreachable.
    """
    text = str(name_or_path)
    if Path(text).exists():
        return
    reason = hub_unreachable_reason()
    if reason is None or _in_hub_cache(text, subfolder):
        return
    raise ParameterError(
        "codec",
        "a local diffusers model directory (save_pretrained output), or a hub id while "
        "the network is reachable",
        _shown(text),
        detail=f"{text!r} is no local path, so it names a model on the hub, which cannot be "
        f"fetched: {reason}; download the model where there is a network, save it with "
        "save_pretrained and give that directory",
    )


class DiffusersCodec:
    """Frozen pretrained diffusers autoencoder as a :class:`~privfed.engines.codecs.Codec`.

    Clip norm: with the model's scaling the latents have roughly unit variance
    per coordinate, so ``‖z‖ ≈ sqrt(d)``; ``default_clip_norm = 2 sqrt(d)``
    leaves room for non-centred latents.  It depends only on the public
    model's construction, never on private data.

    Grayscale images are repeated to the model's input channels on encode and
    averaged back on decode; other channel counts must equal the model's.  Use
    :meth:`from_pretrained` to build one.

    Args:
        model: A loaded diffusers autoencoder of class ``kind``.
        kind: Its class.
        image_shape: ``(C, H, W)`` of the images to encode.
        device: Where the model runs.

    Raises:
        ParameterError: Named ``"image_shape"`` if the model cannot encode an
            image of this shape and decode it back to the same shape (checked
            on a blank probe image at construction, before any data is seen).
    """

    def __init__(
        self,
        model: Any,
        kind: DiffusersKind | str,
        image_shape: tuple[int, int, int],
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        wanted = parse_kind(kind)
        shape = _check_image_shape(image_shape)
        config = model.config
        _check_geometry(wanted, config, shape, f"this {_CLASS_NAMES[wanted]}")
        self._model = model.eval().requires_grad_(False).to(device)
        self._kind = wanted
        self._image_shape = shape
        self._device = torch.device(device)
        self._scaling = float(getattr(config, "scaling_factor", 1.0) or 1.0)
        shift = getattr(config, "shift_factor", None)
        self._shift = float(shift) if shift is not None else 0.0
        self._model_channels = int(config.in_channels)
        self._latent_shape = self._probe()

    def _probe(self) -> tuple[int, ...]:
        """Round-trip one blank image; return the latent shape or refuse the image shape."""
        c, h, w = self._image_shape
        name = _CLASS_NAMES[self._kind]
        try:
            with torch.no_grad():
                latent = self._raw_encode(torch.zeros(1, c, h, w))
                decoded = self._model.decode(latent / self._scaling + self._shift).sample
        except torch.cuda.OutOfMemoryError:
            raise
        except (RuntimeError, ValueError) as exc:
            raise ParameterError(
                "image_shape",
                f"a (C, H, W) shape the {name} can encode and decode",
                self._image_shape,
                detail=f"a blank {h}x{w} probe image fails: {_first_line(exc)}",
            ) from None
        latent_shape = tuple(int(s) for s in latent.shape[1:])
        out_c, out_h, out_w = (int(s) for s in decoded.shape[1:])
        # decode() averages a multi-channel output down to one channel for
        # grayscale images; any other channel mismatch cannot be repaired.
        if (out_h, out_w) != (h, w) or (out_c != c and c != 1):
            raise ParameterError(
                "image_shape",
                f"a (C, H, W) shape the {name} decodes back to itself",
                self._image_shape,
                detail=f"it encodes {h}x{w} to a latent of shape {latent_shape} and decodes "
                f"that to {out_c} channels of {out_h}x{out_w}",
            )
        return latent_shape

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
        kind: DiffusersKind | str,
        image_shape: tuple[int, int, int],
        subfolder: str | None = None,
        device: str | torch.device = "cpu",
    ) -> DiffusersCodec:
        """Load an autoencoder with diffusers' ``from_pretrained``.

        The config is read first: its ``_class_name`` (when present) must be
        the class ``kind`` names, and its channels and downsampling must fit
        ``image_shape``; only then are the weights loaded, and one blank image
        is encoded and decoded to confirm the size.

        Args:
            name_or_path: A local directory (``save_pretrained`` output) or a hub
                id -- the user's ``codec``.
            kind: The model class, required: a :class:`DiffusersKind`, its value
                (``"tiny"``, ``"kl"``, ``"dc"``) or its class name
                (``"AutoencoderKL"``, ...).
            image_shape: ``(C, H, W)`` of the images to encode; ``H`` and ``W``
                must be multiples of the model's downsampling factor.
            subfolder: Sub-directory holding the model (e.g. ``"vae"``).
            device: Where the model runs.

        Raises:
            ParameterError: Named ``"kind"`` for an unknown kind or one the
                model's config contradicts; ``"codec"`` if ``diffusers`` is not
                installed or no model can be read from ``name_or_path``;
                ``"image_shape"`` for a shape the model cannot round-trip.
            ParameterTypeError: On a wrongly typed argument.
        """
        wanted = parse_kind(kind)
        shape = _check_image_shape(image_shape)
        if not isinstance(name_or_path, str | Path) or not str(name_or_path):
            raise ParameterTypeError("codec", "a non-empty str or path", name_or_path)
        if subfolder is not None and not isinstance(subfolder, str):
            raise ParameterTypeError("subfolder", "a str or None", subfolder)
        source = _shown(str(name_or_path))
        diffusers = _import_diffusers(source)
        class_name = _CLASS_NAMES[wanted]
        model_cls = getattr(diffusers, class_name, None)
        if model_cls is None:
            raise ParameterError(
                "kind",
                "a class this diffusers version provides",
                wanted.value,
                detail=f"diffusers {diffusers.__version__} has no {class_name}; upgrade it",
            )
        check_codec_source(name_or_path, subfolder)
        kwargs: dict[str, Any] = {} if subfolder is None else {"subfolder": subfolder}
        readable = "a diffusers model directory (save_pretrained output) or a reachable hub id"
        try:
            config = model_cls.load_config(str(name_or_path), **kwargs)
        except (OSError, ValueError) as exc:
            raise ParameterError("codec", readable, source, detail=_first_line(exc)) from None
        stored = config.get("_class_name") if isinstance(config, Mapping) else None
        if isinstance(stored, str) and stored != class_name:
            match = next((k for k, n in _CLASS_NAMES.items() if n == stored), None)
            if match is None:
                raise ParameterError(
                    "codec",
                    f"a model of class {', '.join(_CLASS_NAMES.values())}",
                    source,
                    detail=f"its config names {stored}",
                )
            raise ParameterError(
                "kind",
                f"{match.value!r} for {source!r}, whose config names {stored}",
                wanted.value,
            )
        _check_geometry(wanted, config, shape, f"the {class_name} {source!r}")
        try:
            model = model_cls.from_pretrained(str(name_or_path), **kwargs)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ParameterError(
                "codec", f"a loadable {class_name}", source, detail=_first_line(exc)
            ) from None
        return cls(model, wanted, shape, device=device)

    @property
    def kind(self) -> DiffusersKind:
        """The model class."""
        return self._kind

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
