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
* :mod:`privfed.dp.dpsgd_calibration` -- DP-SGD noise multipliers to a target
  (ε, δ), solved on the ledger's own PLD accounting.
* :mod:`privfed.dp.distributed` -- distributed DP under secure aggregation: exact
  discrete Gaussian and Skellam client noise, its RDP accounting and calibration.
* :mod:`privfed.dp.distributed_blocks` -- the same for vectors whose blocks carry
  different noise scales, and dropout-resilient secret-shared noise layers.
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
from privfed.dp.distributed import (
    EXACT_DISCRETE_GAUSSIAN_SAMPLER,
    SKELLAM_SAMPLER,
    calibrate_distributed_discrete_gaussian,
    calibrate_distributed_skellam,
    check_ring,
    ddg_rdp,
    ddg_zcdp,
    exact_discrete_gaussian,
    exact_poisson,
    min_honest_contributors,
    rdp_delta,
    rdp_epsilon,
    skellam_noise,
    skellam_rdp,
    skellam_zcdp,
    wrap_probability,
)
from privfed.dp.distributed_blocks import (
    block_rdp,
    block_zcdp,
    calibrate_block_noise,
    dropout_inflation,
)
from privfed.dp.dpsgd_calibration import calibrate_noise_multiplier
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
from privfed.dp.releases.distributed_blocks import DistributedBlockRelease
from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
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
    "EXACT_DISCRETE_GAUSSIAN_SAMPLER",
    "GAUSSIAN_SAMPLER",
    "ROUNDED_GAUSSIAN_SAMPLER",
    "SKELLAM_SAMPLER",
    "Accountant",
    "AccountantRelation",
    "Accounting",
    "Adjacency",
    "DistributedBlockRelease",
    "DistributedDiscreteGaussianRelease",
    "DistributedSkellamRelease",
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
    "block_rdp",
    "block_zcdp",
    "calibrate_analytic_gaussian",
    "calibrate_block_noise",
    "calibrate_distributed_discrete_gaussian",
    "calibrate_distributed_skellam",
    "calibrate_noise_multiplier",
    "check_ring",
    "compose_gdp",
    "count_sensitivity",
    "ddg_rdp",
    "ddg_zcdp",
    "discrete_gaussian",
    "dropout_inflation",
    "exact_discrete_gaussian",
    "exact_poisson",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_noise",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "in_scheme",
    "joint_mu_squared",
    "min_honest_contributors",
    "mu_for_epsilon_delta",
    "paper_baseline_noise_stds",
    "partition_key",
    "plan_latent_release",
    "rdp_delta",
    "rdp_epsilon",
    "register_release",
    "release_error_objective",
    "release_from_dict",
    "release_kinds",
    "rounded_gaussian",
    "second_moment_sensitivity",
    "skellam_noise",
    "skellam_rdp",
    "skellam_zcdp",
    "sum_sensitivity",
    "wrap_probability",
]
