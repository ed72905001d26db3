"""The factory contract, its manifest, and checksummed persistence.

A *factory* is a small generative model that one client trains on the images
of one class it holds and ships to the server once (FederatedFactory,
arXiv:2603.16370, §3).  Every factory in this package satisfies the
:class:`Factory` protocol and is stored as a directory with two files:

* ``weights.safetensors`` -- the tensors (safetensors format, no pickle);
* ``manifest.json`` -- what the weights are: factory type, class id, client id,
  sample count, architecture, training configuration, the serialized release
  event of a DP fit (:mod:`privfed.engines.factory.privacy`) and its clipping
  bound, library version, the SHA-256 of the weights file and the SHA-256 of
  the manifest itself.

A manifest of format 1 carried a string-typed privacy record instead of the
event; :func:`read_manifest` still reads one and converts its record once
(:func:`~privfed.engines.factory.privacy.release_from_record`).

:func:`load_factory` recomputes both checksums before it builds anything and
raises :class:`~privfed.errors.ArtifactIntegrityError` on a mismatch.  The
checksums detect corruption and tampering by anyone who cannot rewrite *both*
files consistently; they are not a signature.  A consortium that must resist
a malicious courier should sign ``manifest.json`` (which pins the weights).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save_file

from privfed._atomic import atomic_path, atomic_write_text
from privfed._checks import check_float, check_int, check_str
from privfed._records import field_dict
from privfed._version import __version__
from privfed.dp.registry import release_from_dict
from privfed.engines.factory.privacy import (
    FACTORY_RELEASE_TAGS,
    FactoryRelease,
    PrivacyRecord,
    cell_partition,
    cell_release_name,
    record_from_release,
    release_from_record,
)
from privfed.errors import (
    ArtifactIntegrityError,
    LedgerError,
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
)

__all__ = [
    "MANIFEST_FILENAME",
    "MANIFEST_FORMAT_VERSION",
    "WEIGHTS_FILENAME",
    "ClientId",
    "Factory",
    "FactoryBase",
    "FactoryManifest",
    "PrivacyRecord",
    "load_verified_tensors",
    "not_fitted_error",
    "read_manifest",
    "save_factory",
    "tensors_sha256",
    "validate_class_id",
    "validate_client_id",
    "validate_images",
]

#: Name of the weights file inside a factory directory.
WEIGHTS_FILENAME: Final = "weights.safetensors"
#: Name of the manifest file inside a factory directory.
MANIFEST_FILENAME: Final = "manifest.json"
#: Version of the manifest layout; bumped on any incompatible change (2: the release
#: event replaced the privacy record of format 1, which is still read).
MANIFEST_FORMAT_VERSION: Final = 2
_LEGACY_FORMAT_VERSION: Final = 1

#: A client identifier: a non-negative ``int`` or a non-empty ``str``.
ClientId = int | str


def validate_class_id(class_id: object, name: str = "class_id") -> int:
    """Check that ``class_id`` is a non-negative ``int`` (``bool`` excluded) and return it.

    Raises:
        ParameterTypeError: ``class_id`` is not an ``int``.
        ParameterError: ``class_id`` is negative.
    """
    return check_int(name, class_id, minimum=0, expected=None)


def validate_client_id(client_id: object, name: str = "client_id") -> ClientId:
    """Check that ``client_id`` is an ``int >= 0`` or a non-empty ``str`` and return it.

    Raises:
        ParameterTypeError: ``client_id`` is neither an ``int`` nor a ``str``.
        ParameterError: ``client_id`` is a negative ``int`` or an empty ``str``.
    """
    if isinstance(client_id, bool) or not isinstance(client_id, int | str):
        raise ParameterTypeError(name, "an int >= 0 or a non-empty str", client_id)
    if isinstance(client_id, int) and client_id < 0:
        raise ParameterError(name, "an int >= 0 or a non-empty str", client_id)
    if isinstance(client_id, str) and not client_id:
        raise ParameterError(name, "an int >= 0 or a non-empty str", client_id)
    return client_id


def validate_images(images: object, name: str = "images", *, min_count: int = 1) -> torch.Tensor:
    """Check an image batch and return it as a contiguous float32 CPU tensor.

    Args:
        images: A ``torch.Tensor`` (or numpy array) of shape ``(N, C, H, W)``
            with values in ``[0, 1]``.
        name: Parameter name used in error messages.
        min_count: Smallest admissible ``N``.

    Raises:
        ParameterTypeError: ``images`` is not a tensor or array.
        ParameterError: Wrong rank, too few images, or values outside ``[0, 1]``.
        NonFiniteInputError: ``images`` holds NaN or infinity.
    """
    if isinstance(images, np.ndarray):
        images = torch.from_numpy(np.ascontiguousarray(images))
    if not isinstance(images, torch.Tensor):
        raise ParameterTypeError(name, "a torch.Tensor or numpy array", images)
    if images.ndim != 4:
        raise ParameterError(name, "a 4-D batch of shape (N, C, H, W)", tuple(images.shape))
    if images.shape[0] < min_count:
        raise ParameterError(
            name, f"a batch of at least {min_count} image(s)", f"{images.shape[0]} images"
        )
    if not images.is_floating_point():
        raise ParameterError(name, "a floating-point tensor", str(images.dtype))
    out = images.detach().to(device="cpu", dtype=torch.float32).contiguous()
    bad = int((~torch.isfinite(out)).sum())
    if bad:
        raise NonFiniteInputError(name, count=bad)
    if out.numel() and (float(out.min()) < 0.0 or float(out.max()) > 1.0):
        raise ParameterError(
            name,
            "values in [0, 1]",
            f"range [{float(out.min()):.4g}, {float(out.max()):.4g}]",
        )
    return out


def tensors_sha256(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 (hex) of a set of named tensors, independent of the file format.

    The digest covers, for each name in sorted order, the name, dtype, shape
    and the raw little-endian bytes of the tensor moved to the CPU, so two
    factories with bit-identical weights have the same digest whatever device
    they live on.  Used by unlearning certificates to name what was removed.
    """
    digest = hashlib.sha256()
    for key in sorted(tensors):
        tensor = tensors[key].detach().to("cpu").contiguous()
        header = json.dumps(
            {"name": key, "dtype": str(tensor.dtype), "shape": list(tensor.shape)},
            sort_keys=True,
        )
        digest.update(header.encode("utf-8"))
        digest.update(b"\x00")
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


@dataclass(frozen=True)
class FactoryManifest:
    """Description of a saved factory (the content of ``manifest.json``).

    Attributes:
        factory_type: Registered type name (``"edm-diffusion"``, ``"latent-gaussian"``).
        class_id: Class the factory generates, or ``None`` if not assigned.
        client_id: Client that trained it, or ``None`` if not assigned.
        sample_count: Number of real images it was fitted on (``n_{c,k}``).
        image_shape: ``(C, H, W)`` of the images it generates.
        architecture: JSON-ready architecture configuration.
        training: JSON-ready training configuration.
        release: The release event of a DP fit (``None``: no formal guarantee),
            named after the factory's cell; the ledger records it as it is.
        library_version: ``privfed.__version__`` that wrote the files.
        weights_sha256: SHA-256 (hex) of the bytes of ``weights.safetensors``.
        format_version: Manifest layout version.
        extra: JSON-ready extra entries.
        clip_norm: The per-record L2 clipping bound of the DP fit (the
            whitened event does not carry it), ``None`` without DP.
    """

    factory_type: str
    class_id: int | None
    client_id: ClientId | None
    sample_count: int
    image_shape: tuple[int, int, int]
    architecture: Mapping[str, Any]
    training: Mapping[str, Any]
    release: FactoryRelease | None
    library_version: str
    weights_sha256: str
    format_version: int = MANIFEST_FORMAT_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        check_str("factory_type", self.factory_type, type_error=False)
        if self.class_id is not None:
            validate_class_id(self.class_id)
        if self.client_id is not None:
            validate_client_id(self.client_id)
        check_int("sample_count", self.sample_count, minimum=1, type_error=False)
        shape = tuple(self.image_shape)
        if len(shape) != 3 or any(
            isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shape
        ):
            raise ParameterError("image_shape", "three ints >= 1 (C, H, W)", self.image_shape)
        object.__setattr__(self, "image_shape", shape)
        if self.release is not None and (
            getattr(type(self.release), "type_tag", None) not in FACTORY_RELEASE_TAGS
        ):
            raise ParameterTypeError("release", "a factory release event or None", self.release)
        if self.release is not None:
            check_float("clip_norm", self.clip_norm, low=0, open_low=True, numpy=False)
        if (
            not isinstance(self.weights_sha256, str)
            or len(self.weights_sha256) != 64
            or any(ch not in "0123456789abcdef" for ch in self.weights_sha256)
        ):
            raise ParameterError("weights_sha256", "64 lowercase hex digits", self.weights_sha256)
        if self.format_version != MANIFEST_FORMAT_VERSION:
            raise ParameterError(
                "format_version", f"{MANIFEST_FORMAT_VERSION}", self.format_version
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (without the manifest's own checksum)."""
        return {
            "format_version": self.format_version,  # first; the rest in field order
            **field_dict(self),
            "image_shape": list(self.image_shape),
            "architecture": dict(self.architecture),
            "training": dict(self.training),
            "release": None if self.release is None else self.release.to_dict(),
            "extra": dict(self.extra),
        }

    @property
    def privacy(self) -> PrivacyRecord:
        """The :class:`PrivacyRecord` view of :attr:`release` (what format 1 stored)."""
        return record_from_release(self.release, self.clip_norm)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FactoryManifest:
        """Inverse of :meth:`to_dict`; a format-1 manifest's record is converted once.

        Raises:
            ArtifactIntegrityError: A field is missing or has the wrong form.
        """
        try:
            release, clip_norm = _release_entry(data)
            return cls(
                factory_type=data["factory_type"],
                class_id=data["class_id"],
                client_id=data["client_id"],
                sample_count=data["sample_count"],
                image_shape=tuple(data["image_shape"]),
                architecture=dict(data["architecture"]),
                training=dict(data["training"]),
                release=release,
                library_version=data["library_version"],
                weights_sha256=data["weights_sha256"],
                extra=dict(data.get("extra", {})),
                clip_norm=clip_norm,
            )
        except (KeyError, TypeError, ValueError, LedgerError) as exc:
            raise ArtifactIntegrityError(
                MANIFEST_FILENAME, f"malformed manifest ({type(exc).__name__})"
            ) from None


def _release_entry(data: Mapping[str, Any]) -> tuple[FactoryRelease | None, float | None]:
    """The release event and clipping bound of a manifest dict of either format."""
    version = data["format_version"]
    if version == _LEGACY_FORMAT_VERSION:
        record = PrivacyRecord.from_dict(data["privacy"])
        if record.mechanism == "none":
            return None, None
        release = release_from_record(
            record,
            name=cell_release_name(data["class_id"], data["client_id"]),
            partition=cell_partition(data["class_id"], data["client_id"]),
        )
        return release, record.clip_norm
    if version != MANIFEST_FORMAT_VERSION:
        raise ValueError("unknown manifest format")
    if data["release"] is None:
        return None, None
    event = release_from_dict(data["release"], tags=FACTORY_RELEASE_TAGS)
    return event, data["clip_norm"]  # type: ignore[return-value]


def _canonical_json(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


@runtime_checkable
class Factory(Protocol):
    """What the generative matrix needs from a per-(class, client) generator.

    Implementations: :class:`~privfed.engines.factory.EDMDiffusionFactory`,
    :class:`~privfed.engines.factory.LatentGaussianFactory`.
    """

    #: Registered type name written into manifests.
    factory_type: str

    def fit(self, images: torch.Tensor) -> Factory:
        """Train on one client's images of one class.

        Args:
            images: float32 tensor ``(N, C, H, W)``, values in ``[0, 1]``.

        Returns:
            ``self``.
        """
        ...

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw ``n`` images: float32 CPU tensor ``(n, C, H, W)`` in ``[0, 1]``."""
        ...

    @property
    def num_parameters(self) -> int:
        """Number of scalar values shipped (the communication cost in values)."""
        ...

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` (or :meth:`load`) has run."""
        ...

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors that define the fitted factory (what is shipped)."""
        ...

    def manifest(self) -> FactoryManifest:
        """The manifest describing the fitted factory (``weights_sha256`` of its tensors)."""
        ...

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and ``manifest.json`` into ``directory``."""
        ...


def not_fitted_error(what: str = "a fitted factory (call fit or load first)") -> ParameterError:
    """The error raised when an unfitted factory is used (``self`` names the object)."""
    return ParameterError("self", what, "unfitted")


_FactoryT = TypeVar("_FactoryT", bound="FactoryBase")


class FactoryBase:
    """State and persistence shared by the built-in factories.

    A subclass sets :attr:`factory_type`, implements :meth:`state_tensors`,
    :meth:`_parameter_tensors` and :meth:`_manifest_configs`, calls
    :meth:`_init_identity` from its constructor and sets ``_image_shape``,
    ``_sample_count`` and (for a private fit) :meth:`_set_release` when it
    commits a fit.  It gets the fitted state, sizes and release event (and
    its :class:`PrivacyRecord` view), the weights
    digest, the manifest, :meth:`save`, and (for its ``load``)
    :meth:`_load_checked` and :meth:`_set_loaded`.
    """

    #: Registered type name written into manifests.
    factory_type: ClassVar[str]

    class_id: int | None
    client_id: ClientId | None
    _image_shape: tuple[int, int, int] | None
    _sample_count: int
    _release: FactoryRelease | None
    _clip_norm: float | None

    def _init_identity(self, class_id: int | None, client_id: ClientId | None) -> None:
        self.class_id = None if class_id is None else validate_class_id(class_id)
        self.client_id = None if client_id is None else validate_client_id(client_id)
        self._image_shape = None
        self._sample_count = 0
        self._release = None
        self._clip_norm = None

    def _set_release(self, release: FactoryRelease | None, clip_norm: float | None) -> None:
        """Commit the release event of a fit and its per-record clipping bound."""
        self._release = release
        self._clip_norm = None if release is None else clip_norm

    @property
    def release_name(self) -> str:
        """The ledger name of this factory's release (see :func:`cell_release_name`)."""
        return cell_release_name(self.class_id, self.client_id)

    @property
    def release_partition(self) -> Any:
        """The ``"cell"``-scheme partition of this factory's records (``None``: unassigned)."""
        return cell_partition(self.class_id, self.client_id)

    @property
    def is_fitted(self) -> bool:
        """Whether the factory has been fitted or loaded."""
        return self._image_shape is not None

    def _repr_with(self, details: str) -> str:
        """``Type(class_id=..., client_id=..., <details>, fitted|unfitted)``."""
        state = "fitted" if self.is_fitted else "unfitted"
        return (
            f"{type(self).__name__}(class_id={self.class_id!r}, client_id={self.client_id!r}, "
            f"{details}, {state})"
        )

    def _parameter_tensors(self) -> list[torch.Tensor]:
        """The fitted tensors counted by :attr:`num_parameters`."""
        raise NotImplementedError

    @property
    def num_parameters(self) -> int:
        """Number of scalar values shipped (0 before fitting)."""
        if not self.is_fitted:
            return 0
        return int(sum(t.numel() for t in self._parameter_tensors()))

    @property
    def sample_count(self) -> int:
        """Number of real images the factory was fitted on (0 before fitting)."""
        return self._sample_count

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """``(C, H, W)`` of generated images, ``None`` before fitting."""
        return self._image_shape

    @property
    def release(self) -> FactoryRelease | None:
        """The release event of the current weights (``None``: no formal guarantee)."""
        return self._release

    @property
    def privacy(self) -> PrivacyRecord:
        """How the current weights were protected: the record view of :attr:`release`."""
        return record_from_release(self._release, self._clip_norm)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors that define the fitted factory (what is shipped)."""
        raise NotImplementedError

    def _manifest_configs(
        self, tensors: Mapping[str, torch.Tensor]
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """The manifest's ``architecture`` and ``training`` entries."""
        raise NotImplementedError

    def weights_sha256(self) -> str:
        """SHA-256 of the shipped tensors (see :func:`tensors_sha256`)."""
        return tensors_sha256(self.state_tensors())

    def manifest(self) -> FactoryManifest:
        """Manifest of the fitted factory (``weights_sha256`` of its tensors).

        Raises:
            ParameterError: The factory is not fitted.
        """
        tensors = self.state_tensors()
        shape = self._image_shape
        if shape is None:  # pragma: no cover -- set together with the tensors
            raise not_fitted_error("a fitted factory")
        architecture, training = self._manifest_configs(tensors)
        return FactoryManifest(
            factory_type=self.factory_type,
            class_id=self.class_id,
            client_id=self.client_id,
            sample_count=self._sample_count,
            image_shape=shape,
            architecture=architecture,
            training=training,
            release=self._release,
            library_version=__version__,
            weights_sha256=tensors_sha256(tensors),
            clip_norm=self._clip_norm,
        )

    def save(self, directory: str | Path) -> Path:
        """Write ``weights.safetensors`` and a checksummed ``manifest.json``.

        Returns:
            The directory.

        Raises:
            ParameterError: The factory is not fitted.
        """
        return save_factory(directory, self.state_tensors(), self.manifest())

    @classmethod
    def _load_checked(
        cls, directory: str | Path
    ) -> tuple[FactoryManifest, dict[str, torch.Tensor]]:
        """Verified manifest and tensors of a saved factory of this class's type.

        Raises:
            ArtifactIntegrityError: As :func:`load_verified_tensors`, or the
                manifest names another factory type.
        """
        manifest, tensors = load_verified_tensors(directory)
        if manifest.factory_type != cls.factory_type:
            raise ArtifactIntegrityError(MANIFEST_FILENAME, "factory type mismatch")
        return manifest, tensors

    def _set_loaded(self: _FactoryT, manifest: FactoryManifest) -> _FactoryT:
        """Take the image shape and sample count from a loaded manifest; return ``self``."""
        c, h, w = manifest.image_shape
        self._image_shape = (c, h, w)
        self._sample_count = manifest.sample_count
        self._set_release(manifest.release, manifest.clip_norm)
        return self


def save_factory(
    directory: str | Path, tensors: Mapping[str, torch.Tensor], manifest: FactoryManifest
) -> Path:
    """Write a factory directory (weights + checksummed manifest).

    The ``weights_sha256`` field of ``manifest`` is replaced by the SHA-256 of
    the bytes actually written, and a ``manifest_sha256`` field (SHA-256 of
    the canonical JSON of every other field) is added.

    Args:
        directory: Target directory; created if missing.  Existing files of
            the same names are overwritten.
        tensors: Named tensors to store (moved to CPU, made contiguous).
        manifest: Description of the factory.

    Returns:
        The directory as a :class:`~pathlib.Path`.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    weights_path = path / WEIGHTS_FILENAME
    with atomic_path(weights_path) as tmp:  # a kill leaves the old weights or the new
        save_file(cpu, str(tmp))
    weights_sha = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    body = dataclasses.replace(manifest, weights_sha256=weights_sha).to_dict()
    body["manifest_sha256"] = hashlib.sha256(_canonical_json(body)).hexdigest()
    atomic_write_text(path / MANIFEST_FILENAME, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(directory: str | Path) -> FactoryManifest:
    """Read and verify ``manifest.json`` and the weights file it pins.

    Raises:
        ArtifactIntegrityError: A file is missing, the manifest is malformed,
            or either checksum does not match.
    """
    return _verified(directory)[0]


def _verified(directory: str | Path) -> tuple[FactoryManifest, bytes]:
    path = Path(directory)
    manifest_path = path / MANIFEST_FILENAME
    weights_path = path / WEIGHTS_FILENAME
    if not manifest_path.is_file():
        raise ArtifactIntegrityError(MANIFEST_FILENAME, "file is missing")
    if not weights_path.is_file():
        raise ArtifactIntegrityError(WEIGHTS_FILENAME, "file is missing")
    try:
        body = json.loads(manifest_path.read_text())
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deep, a huge int
        raise ArtifactIntegrityError(MANIFEST_FILENAME, "not valid JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("manifest_sha256"), str):
        raise ArtifactIntegrityError(MANIFEST_FILENAME, "no manifest checksum")
    claimed = body.pop("manifest_sha256")
    if hashlib.sha256(_canonical_json(body)).hexdigest() != claimed:
        raise ArtifactIntegrityError(MANIFEST_FILENAME, "checksum mismatch")
    manifest = FactoryManifest.from_dict(body)
    # The bytes are read once and the same bytes are checked and parsed, so a
    # file swapped between the check and the load cannot slip through.
    weights = weights_path.read_bytes()
    if hashlib.sha256(weights).hexdigest() != manifest.weights_sha256:
        raise ArtifactIntegrityError(WEIGHTS_FILENAME, "checksum mismatch")
    return manifest, weights


def load_verified_tensors(directory: str | Path) -> tuple[FactoryManifest, dict[str, torch.Tensor]]:
    """Verify a factory directory and return its manifest and CPU tensors.

    Raises:
        ArtifactIntegrityError: As :func:`read_manifest`, or the weights file
            cannot be parsed or holds a NaN or an infinity.
    """
    manifest, weights = _verified(directory)
    try:
        tensors = safetensors_load(weights)
    except Exception:  # safetensors raises its own error types on malformed files
        raise ArtifactIntegrityError(WEIGHTS_FILENAME, "unreadable safetensors file") from None
    # The checksums pin the bytes, not who wrote them: a shipped factory whose
    # weights hold NaN or infinity would load and sample garbage, so it is refused.
    if any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in tensors.values()):
        raise ArtifactIntegrityError(WEIGHTS_FILENAME, "tensors are not all finite")
    return manifest, tensors
