"""The registry of factory kinds: which class loads a saved factory.

It sits above the factory modules (:mod:`~privfed.engines.factory.base` knows
no concrete kind), so loading needs no import cycle.  A new factory kind is
added to :data:`FACTORY_KINDS` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from privfed.engines.factory.base import MANIFEST_FILENAME, read_manifest
from privfed.engines.factory.edm import EDMDiffusionFactory
from privfed.engines.factory.gaussian import LatentGaussianFactory
from privfed.engines.factory.mixture import LatentMixtureFactory
from privfed.errors import ArtifactIntegrityError, ParameterError

__all__ = ["FACTORY_KINDS", "load_factory"]

#: ``factory_type`` recorded in a manifest -> the class that loads it.
FACTORY_KINDS: Mapping[str, type[Any]] = MappingProxyType(
    {
        EDMDiffusionFactory.factory_type: EDMDiffusionFactory,
        LatentGaussianFactory.factory_type: LatentGaussianFactory,
        LatentMixtureFactory.factory_type: LatentMixtureFactory,
    }
)


def load_factory(directory: str | Path, *, codec: Any = None) -> Any:
    """Load any saved factory, dispatching on the manifest's ``factory_type``.

    Both checksums are verified before any tensor is deserialised.

    Args:
        directory: Directory written by a factory's ``save``.
        codec: The public codec (:class:`privfed.engines.codecs.Codec`) of a
            codec-mode :class:`~privfed.engines.factory.gaussian.LatentGaussianFactory`;
            ``None`` for every other factory.

    Returns:
        A fitted factory of the recorded type (CPU).

    Raises:
        ArtifactIntegrityError: Missing file, bad checksum, malformed
            manifest, or unknown factory type.
    """
    manifest = read_manifest(directory)
    cls = FACTORY_KINDS.get(manifest.factory_type)
    if cls is None:
        raise ArtifactIntegrityError(MANIFEST_FILENAME, "unknown factory type")
    if cls in (LatentGaussianFactory, LatentMixtureFactory):
        return cls.load(directory, codec=codec)
    if codec is not None:
        raise ParameterError("codec", f"None for a {manifest.factory_type} factory", "a codec")
    return cls.load(directory)
