"""The release kinds, one module each, discovered automatically.

Importing this package imports every module of its folder whose name does not
start with ``_`` (:func:`pkgutil.iter_modules`); each module registers its kind
with :func:`privfed.dp.events.register_release`.  Adding a kind is therefore
one new module here plus its test -- see :mod:`privfed.dp.events`.

* :mod:`~privfed.dp.releases.gaussian` -- :class:`GaussianRelease` (``"gaussian"``).
* :mod:`~privfed.dp.releases.subsampled_gaussian` --
  :class:`SubsampledGaussianRelease` (``"subsampled-gaussian"``).
"""

from __future__ import annotations

import importlib
import pkgutil

from privfed.dp.releases.gaussian import GaussianRelease
from privfed.dp.releases.subsampled_gaussian import SubsampledGaussianRelease

__all__ = ["GaussianRelease", "SubsampledGaussianRelease"]


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_discover()
