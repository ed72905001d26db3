"""The engines: one wing per one-shot method, and what both wings share.

* :mod:`privfed.engines.latent` -- the latent-statistic engine (FedKT-CSD):
  exact per-class latent statistics, secure aggregation, one DP release, one
  Gaussian per class, a synthetic dataset.
* :mod:`privfed.engines.factory` -- the factory-matrix engine
  (FederatedFactory): per-(class, client) generative factories in a matrix with
  quota synthesis and exact unlearning.
* :mod:`privfed.engines.job` -- the job contract both wings run through: typed
  stages, one progress protocol, one report-and-write path.
* Shared by both wings: :mod:`privfed.engines.codecs` (frozen public codecs),
  :mod:`privfed.engines.classifier` (the downstream classifier); data loading and
  partitioning is :mod:`privfed.data`.

Importing this package loads nothing heavy; torch loads with the modules that
compute latents, train models or decode images.
"""

__all__: list[str] = []
