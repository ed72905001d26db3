"""What protected a factory's weights: its release event, and the old record.

A DP factory's fit is one release that a :class:`privfed.dp.PrivacyLedger`
accounts: a :class:`privfed.dp.SubsampledGaussianRelease` for DP-SGD, a
whitened :class:`privfed.dp.GaussianRelease` for the DP latent-Gaussian
factory.  The factory builds that event when it fits, names it after its cell
(:func:`cell_release_name`, :func:`cell_partition`), ships its serialized form
(:meth:`privfed.dp.ReleaseEvent.to_dict`) in its manifest, and the job records
the event itself in its ledger.

:class:`PrivacyRecord` is the string-typed description that manifests of
format 1 carried instead.  It survives as a compatible view
(``factory.privacy``, :func:`record_from_release`) and as the input of
:func:`~privfed.engines.factory.record_in_ledger`; an old manifest's record is
converted once, when the manifest is read (:func:`release_from_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from privfed._checks import check_bool, check_choice, check_float, check_int, check_str
from privfed.dp.events import Partition, PartitionKey, in_scheme
from privfed.dp.releases.gaussian import GaussianRelease
from privfed.dp.releases.subsampled_gaussian import SubsampledGaussianRelease
from privfed.dp.sensitivity import Adjacency
from privfed.engines.factory.rates import realised_sampling_rate
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "FACTORY_RELEASE_TAGS",
    "FACTORY_SCHEME",
    "SEEDED_TORCH_SAMPLER",
    "FactoryRelease",
    "PrivacyRecord",
    "cell_partition",
    "cell_release_name",
    "record_from_release",
    "release_from_record",
]

#: The ledger's partition scheme of factory releases: one record lives in exactly one
#: (class, client) cell, so cells compose in parallel with each other and
#: sequentially with releases of any other scheme (such as the latent engine's classes).
FACTORY_SCHEME: Final = "cell"

#: Sampler name recorded for seeded (reproducible, not cryptographic) DP-SGD noise.
SEEDED_TORCH_SAMPLER: Final = "torch-generator-gaussian"

#: The release kinds a factory ships (their JSON type tags).
FACTORY_RELEASE_TAGS: Final = (
    GaussianRelease.type_tag,
    SubsampledGaussianRelease.type_tag,
)

#: A factory's release event.
FactoryRelease = GaussianRelease | SubsampledGaussianRelease


def cell_release_name(class_id: int | str | None, client_id: int | str | None) -> str:
    """The ledger name of a factory's release: ``"factory class=3 client=7"``."""
    return f"factory class={class_id} client={client_id}"


def cell_partition(
    class_id: int | str | None, client_id: int | str | None
) -> Partition:
    """The factory's cell in the ``"cell"`` scheme; ``None`` (every record) when unassigned."""
    if class_id is None or client_id is None:
        return None
    return in_scheme(FACTORY_SCHEME, f"class={class_id}/client={client_id}")


@dataclass(frozen=True)
class PrivacyRecord:
    """How a factory's weights were protected, as shipped in its manifest.

    ``mechanism="none"`` means no formal guarantee: the weights are a
    deterministic function of the client's images and may memorise them.
    ``mechanism="dp-sgd"`` means the weights are the output of DP-SGD with
    Poisson sampling (Abadi et al. 2016, arXiv:1607.00133): per-example
    gradients clipped to ``clip_norm`` (L2) and Gaussian noise of standard
    deviation ``noise_multiplier * clip_norm`` added to their sum at each of
    ``steps`` steps, each record included independently with probability
    ``sampling_rate``.  The sample count ``n`` that the manifest also carries
    is released in the clear, so the honest statement is replace-one
    adjacency (public counts) within the factory's training set; that is how
    :func:`release_from_record` converts it.

    ``mechanism="gaussian"`` means the shipped tensors are post-processing of
    one Gaussian-mechanism release (the DP latent-Gaussian factory: noisy
    sums of clipped latents and of their outer products) whitened so that it
    is exactly ``1/noise_multiplier``-GDP under replace-one adjacency within
    the factory's training set; ``clip_norm`` is the latent clipping radius,
    ``sampling_rate`` is 1 and ``steps`` 1 (one release of every record).

    The record carries the mechanism's parameters only; ε is computed by a
    privacy accountant (:mod:`privfed.dp`), never here.

    Attributes:
        mechanism: ``"none"``, ``"dp-sgd"`` or ``"gaussian"``.
        noise_multiplier: σ/Δ (dimensionless, > 0) for DP-SGD, else ``None``.
        clip_norm: Per-example L2 clipping bound (> 0) for DP-SGD, else ``None``.
        sampling_rate: Poisson inclusion probability in (0, 1] for DP-SGD, else ``None``.
        steps: Number of noisy steps (>= 1) for DP-SGD, else ``None``.
        seeded: Whether the noise came from a caller-supplied seed
            (reproducible, for experiments) rather than the OS CSPRNG.
        sampler: Name of the noise sampler for DP-SGD, else ``None``.
    """

    mechanism: Literal["none", "dp-sgd", "gaussian"] = "none"
    noise_multiplier: float | None = None
    clip_norm: float | None = None
    sampling_rate: float | None = None
    steps: int | None = None
    seeded: bool = False
    sampler: str | None = None

    def __post_init__(self) -> None:
        check_choice("mechanism", self.mechanism, ("none", "dp-sgd", "gaussian"))
        params = (
            self.noise_multiplier,
            self.clip_norm,
            self.sampling_rate,
            self.steps,
            self.sampler,
        )
        if self.mechanism == "none":
            if any(p is not None for p in params):
                raise ParameterError(
                    "mechanism",
                    "'dp-sgd' or 'gaussian' when mechanism parameters are given",
                    self.mechanism,
                )
            return
        _, _, rate = (
            check_float(
                name, getattr(self, name), low=0, open_low=True, numpy=False, type_error=False
            )
            for name in ("noise_multiplier", "clip_norm", "sampling_rate")
        )
        if rate > 1.0:
            raise ParameterError("sampling_rate", "a float in (0, 1]", rate)
        check_int("steps", self.steps, minimum=1, type_error=False)
        if self.mechanism == "gaussian" and (rate != 1.0 or self.steps != 1):
            raise ParameterError(
                "sampling_rate/steps",
                "1.0 and 1 for a one-shot Gaussian release",
                (rate, self.steps),
            )
        check_bool("seeded", self.seeded)
        check_str("sampler", self.sampler, type_error=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary of the record."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyRecord:
        """Inverse of :meth:`to_dict`; validates every field."""
        return cls(**dict(data))


def release_from_record(
    record: PrivacyRecord, *, name: str, partition: int | str | PartitionKey | None
) -> FactoryRelease:
    """The release event a DP privacy record describes (replace-one, ``"cell"`` scheme).

    A DP-SGD record becomes a :class:`privfed.dp.SubsampledGaussianRelease`
    at the rate the sampler realises (:func:`realised_sampling_rate` of the
    record's rate, a no-op for records that already carry it); a one-shot
    Gaussian record a :class:`privfed.dp.GaussianRelease` in whitened form
    (Δ = 1, σ = ``noise_multiplier``, so μ = 1/``noise_multiplier``).

    Raises:
        ParameterError: ``record`` has no DP mechanism, or its sampling rate
            is below ``2**-64``.
    """
    if record.mechanism not in ("dp-sgd", "gaussian"):
        raise ParameterError(
            "record", "a DP-SGD or Gaussian-mechanism privacy record", record.mechanism
        )
    sampler = record.sampler or SEEDED_TORCH_SAMPLER
    # One record lives in exactly one (class, client) cell: cells are the scheme.
    cell = in_scheme(FACTORY_SCHEME, partition)
    replace = Adjacency.REPLACE_ONE
    if record.mechanism == "gaussian":
        return GaussianRelease(
            name=name,
            partition=cell,
            l2_sensitivity=1.0,
            noise_std=float(record.noise_multiplier or 0.0),
            adjacency=replace,
            sampler=sampler,
            seeded=record.seeded,
        )
    return SubsampledGaussianRelease(
        name=name,
        partition=cell,
        noise_multiplier=float(record.noise_multiplier or 0.0),
        sampling_rate=realised_sampling_rate(float(record.sampling_rate or 0.0)),
        steps=int(record.steps or 0),
        adjacency=replace,
        sampler=sampler,
        seeded=record.seeded,
    )


def record_from_release(release: object, clip_norm: float | None) -> PrivacyRecord:
    """The :class:`PrivacyRecord` view of a factory's release (``None``: no DP).

    Args:
        release: A whitened :class:`privfed.dp.GaussianRelease`, a
            :class:`privfed.dp.SubsampledGaussianRelease`, or ``None``.
        clip_norm: The per-record L2 clipping bound of the release (the
            whitened event does not carry it); ignored when ``release`` is ``None``.

    Raises:
        ParameterTypeError: ``release`` is of another kind.
    """
    if release is None:
        return PrivacyRecord()
    common = {"seeded": release.seeded, "sampler": release.sampler}  # type: ignore[attr-defined]
    if type(release) is GaussianRelease:
        return PrivacyRecord(
            mechanism="gaussian",
            noise_multiplier=release.noise_std,
            clip_norm=clip_norm,
            sampling_rate=1.0,
            steps=1,
            **common,
        )
    if type(release) is SubsampledGaussianRelease:
        return PrivacyRecord(
            mechanism="dp-sgd",
            noise_multiplier=release.noise_multiplier,
            clip_norm=clip_norm,
            sampling_rate=release.sampling_rate,
            steps=release.steps,
            **common,
        )
    raise ParameterTypeError("release", "a factory release event or None", release)
