"""The release kinds, one module each; :mod:`privfed.dp.registry` lists them.

* :mod:`~privfed.dp.releases.gaussian` -- :class:`GaussianRelease` (``"gaussian"``).
* :mod:`~privfed.dp.releases.subsampled_gaussian` --
  :class:`SubsampledGaussianRelease` (``"subsampled-gaussian"``).
* :mod:`~privfed.dp.releases.distributed_gaussian`,
  :mod:`~privfed.dp.releases.distributed_skellam`,
  :mod:`~privfed.dp.releases.distributed_skellam_rdp` (the same noise on its exact
  RDP curve: training rounds),
  :mod:`~privfed.dp.releases.distributed_blocks` -- the distributed kinds.

Adding a kind is one new module here, its entry in
:data:`privfed.dp.registry.RELEASE_KINDS` and its test -- see :mod:`privfed.dp.events`.
"""

from __future__ import annotations

from privfed.dp.releases.gaussian import GaussianRelease
from privfed.dp.releases.subsampled_gaussian import SubsampledGaussianRelease

__all__ = ["GaussianRelease", "SubsampledGaussianRelease"]
