"""Differential privacy for privfed: calibration, sensitivities, plans, noise, ledger.

Pure numpy + scipy (dp-accounting is imported lazily, only by the functions that
export to it or use its PLD accountant).  Never imports torch.

* :mod:`privfed.dp.calibration` -- exact analytic Gaussian calibration and μ-GDP.
* :mod:`privfed.dp.sensitivity` -- adjacency relations and exact sensitivities,
  including the joint μ of the latent-statistic release.
* :mod:`privfed.dp.planning` -- noise plans for the latent-statistic release.
* :mod:`privfed.dp.noise` -- CSPRNG-backed Gaussian, rounded and discrete
  Gaussian samplers.
* :mod:`privfed.dp.events` -- the release-event protocol, partition schemes and
  the registry of release kinds (one module per kind in :mod:`privfed.dp.releases`).
* :mod:`privfed.dp.ledger` -- an audited ledger that composes release events.
"""

from __future__ import annotations

from privfed.dp.calibration import (
    calibrate_analytic_gaussian,
    compose_gdp,
    gaussian_delta,
    gaussian_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    mu_for_epsilon_delta,
)
from privfed.dp.events import (
    DEFAULT_SCHEME,
    Accountant,
    Accounting,
    PartitionKey,
    ReleaseEvent,
    in_scheme,
    partition_key,
    register_release,
    release_from_dict,
    release_kinds,
)
from privfed.dp.ledger import (
    AccountantRelation,
    GaussianRelease,
    LedgerGuarantee,
    Partition,
    PrivacyLedger,
    Release,
    SubsampledGaussianRelease,
)
from privfed.dp.noise import (
    DISCRETE_GAUSSIAN_SAMPLER,
    GAUSSIAN_SAMPLER,
    ROUNDED_GAUSSIAN_SAMPLER,
    discrete_gaussian,
    gaussian_noise,
    rounded_gaussian,
)
from privfed.dp.planning import (
    LatentReleasePlan,
    SplitName,
    paper_baseline_noise_stds,
    plan_latent_release,
    release_error_objective,
)
from privfed.dp.sensitivity import (
    Adjacency,
    count_sensitivity,
    joint_mu_squared,
    second_moment_sensitivity,
    sum_sensitivity,
)

__all__ = [
    "DEFAULT_SCHEME",
    "DISCRETE_GAUSSIAN_SAMPLER",
    "GAUSSIAN_SAMPLER",
    "ROUNDED_GAUSSIAN_SAMPLER",
    "Accountant",
    "AccountantRelation",
    "Accounting",
    "Adjacency",
    "GaussianRelease",
    "LatentReleasePlan",
    "LedgerGuarantee",
    "Partition",
    "PartitionKey",
    "PrivacyLedger",
    "Release",
    "ReleaseEvent",
    "SplitName",
    "SubsampledGaussianRelease",
    "calibrate_analytic_gaussian",
    "compose_gdp",
    "count_sensitivity",
    "discrete_gaussian",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_noise",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "in_scheme",
    "joint_mu_squared",
    "mu_for_epsilon_delta",
    "paper_baseline_noise_stds",
    "partition_key",
    "plan_latent_release",
    "register_release",
    "release_error_objective",
    "release_from_dict",
    "release_kinds",
    "rounded_gaussian",
    "second_moment_sensitivity",
    "sum_sensitivity",
]
