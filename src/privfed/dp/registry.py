"""The release kinds: one explicit table, and JSON through it.

:data:`RELEASE_KINDS` lists every built-in kind of :mod:`privfed.dp.releases`;
each declares its JSON type tag as ``type_tag``.  The ledger accepts a release
only if its exact class is registered here (:func:`is_registered`) and
restores ledger JSON through the same table (:func:`release_from_dict`).  The
kinds import their protocol from :mod:`privfed.dp.events`, which imports no
kind, so no import circle is left and a tool reads the table from this file.
Kinds defined outside privfed are added at run time with
:func:`register_release`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final, TypeVar

from privfed.dp.events import ReleaseEvent, check_name
from privfed.dp.releases.distributed_blocks import DistributedBlockRelease
from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
from privfed.dp.releases.distributed_skellam_rdp import DistributedSkellamRdpRelease
from privfed.dp.releases.gaussian import GaussianRelease
from privfed.dp.releases.subsampled_gaussian import SubsampledGaussianRelease
from privfed.errors import LedgerError, ParameterError, ParameterTypeError

__all__ = [
    "RELEASE_KINDS",
    "is_registered",
    "register_release",
    "release_from_dict",
    "release_kinds",
]

#: Every built-in release kind (its JSON tag is its ``type_tag``).
RELEASE_KINDS: Final[tuple[type[ReleaseEvent], ...]] = (
    GaussianRelease,
    SubsampledGaussianRelease,
    DistributedBlockRelease,
    DistributedDiscreteGaussianRelease,
    DistributedSkellamRelease,
    DistributedSkellamRdpRelease,
)

_COMMON_FIELDS: Final = ("name", "partition", "adjacency", "sampler", "seeded")

E = TypeVar("E", bound=ReleaseEvent)


def _check_kind(cls: object, tag: str) -> None:
    """Refuse a class that cannot be a release kind under ``tag`` (a new or its own tag)."""
    if not (isinstance(cls, type) and issubclass(cls, ReleaseEvent)):
        raise ParameterTypeError("cls", "a ReleaseEvent subclass", cls)
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise ParameterTypeError("cls", "a frozen dataclass", cls)
    names = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if not set(_COMMON_FIELDS) <= names or "type" in names:
        raise ParameterError(
            "cls", f"a dataclass with the fields {list(_COMMON_FIELDS)} and no 'type'", cls
        )
    taken = _REGISTRY.get(tag)
    if taken is not None and (taken.__module__, taken.__qualname__) != (
        cls.__module__,
        cls.__qualname__,
    ):
        raise ParameterError("tag", "a type tag not registered yet", tag)


_REGISTRY: dict[str, type[ReleaseEvent]] = {}


def _register(cls: type[E], tag: str) -> type[E]:
    _check_kind(cls, check_name(tag, "tag"))
    cls.type_tag = tag
    _REGISTRY[tag] = cls
    return cls


for _kind in RELEASE_KINDS:
    _register(_kind, _kind.type_tag)


def register_release(tag: str) -> Callable[[type[E]], type[E]]:
    """Class decorator: register a release kind defined outside privfed under ``tag``.

    The class must subclass :class:`~privfed.dp.events.ReleaseEvent`, be a
    frozen dataclass and declare the common fields; the tag must be new.  Its
    ``type_tag`` is set to ``tag``.

    Raises:
        ParameterError: ``tag`` is empty or already taken by another class.
        ParameterTypeError: The class is not a frozen-dataclass ``ReleaseEvent``.
    """
    check_name(tag, "tag")

    def decorate(cls: type[E]) -> type[E]:
        return _register(cls, tag)

    return decorate


def release_kinds() -> Mapping[str, type[ReleaseEvent]]:
    """Every registered release kind by type tag (the built-in table first)."""
    return MappingProxyType(dict(_REGISTRY))


def is_registered(release: object) -> bool:
    """Whether ``release`` is an instance of a registered kind (exact class)."""
    cls = type(release)
    tag = getattr(cls, "type_tag", None)
    return isinstance(tag, str) and _REGISTRY.get(tag) is cls


def release_from_dict(data: object, *, tags: Sequence[str] | None = None) -> ReleaseEvent:
    """Rebuild any registered release from its :meth:`ReleaseEvent.to_dict` form.

    Args:
        data: The dict.
        tags: If given, only these type tags are accepted.

    Raises:
        LedgerError: Not a dict, an unknown (or not accepted) type tag, or an
            invalid release.
    """
    if not isinstance(data, dict):
        raise LedgerError("each release must be a JSON object")
    kind = data.get("type")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None or (tags is not None and kind not in tags):
        raise LedgerError(f"unknown release type {kind!r}")
    return cls.from_dict(data)
