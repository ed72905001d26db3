"""The Gaussian release of clipped latent moments, shared by both wings.

Both engines release, per partition (a class of the latent engine, a (class,
client) cell of the factory engine), the noisy sum and second moment of
latents clipped to a public radius:

* :mod:`~privfed.engines.moments.planning` -- the noise plan for a target
  (ε, δ) (:func:`~privfed.engines.moments.planning.plan_latent_release`), the
  ledger events it spends and the ledger its target budgets;
* :mod:`~privfed.engines.moments.noise` -- the seeded-noise derivation and the
  clipping both wings use.

numpy and :mod:`privfed.dp` only: importing this package never loads torch.
"""

__all__: list[str] = []
