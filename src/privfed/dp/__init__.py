"""Differential privacy for privfed: calibration, sensitivities, noise, ledger.

Pure numpy + scipy; scipy.special, scipy.optimize and dp-accounting are imported
only by the functions that use them (the Gaussian calibration, the PLD/RDP
accountants).  Never imports torch.

* :mod:`privfed.dp.calibrator` -- the one calibrator every noise calibration uses:
  the smallest parameter of a release that meets a privacy target.
* :mod:`privfed.dp.calibration` -- exact analytic Gaussian calibration and μ-GDP.
* :mod:`privfed.dp.sensitivity` -- adjacency relations and exact sensitivities,
  including the joint μ of the latent-statistic release.
* :mod:`privfed.dp.noise` -- CSPRNG-backed Gaussian, rounded and discrete
  Gaussian samplers.
* :mod:`privfed.dp.events` -- the release-event protocol and partition schemes.
* :mod:`privfed.dp.registry` -- the one table of release kinds (one module per
  kind in :mod:`privfed.dp.releases`) and release JSON through it.
* :mod:`privfed.dp.ledger` -- an audited ledger that composes release events.
* :mod:`privfed.dp.rdp` -- the Rényi orders and the one RDP -> (ε, δ) conversion
  (the ledger's).
* :mod:`privfed.dp.dpsgd_calibration` -- DP-SGD noise multipliers to a target
  (ε, δ), solved on the ledger's own PLD accounting.
* :mod:`privfed.dp.samplers` -- exact discrete Gaussian, Poisson and Skellam
  samplers for distributed client noise, driven by a ChaCha20 CSPRNG.
* :mod:`privfed.dp.distributed` -- distributed DP under secure aggregation: the
  RDP accounting and calibration of that client noise.
* :mod:`privfed.dp.distributed_blocks` -- the same for vectors whose blocks carry
  different noise scales, and dropout-resilient secret-shared noise layers.

Names load on first use (PEP 562): ``import privfed.dp`` runs none of these
modules, and ``from privfed.dp import gdp_mu`` imports only
:mod:`privfed.dp.calibration` (and what it needs); the three views of the
names are described in :mod:`privfed._lazy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "calibrate_analytic_gaussian": "privfed.dp.calibration",
    "compose_gdp": "privfed.dp.calibration",
    "gaussian_delta": "privfed.dp.calibration",
    "gaussian_epsilon": "privfed.dp.calibration",
    "gdp_delta": "privfed.dp.calibration",
    "gdp_epsilon": "privfed.dp.calibration",
    "gdp_mu": "privfed.dp.calibration",
    "mu_for_epsilon_delta": "privfed.dp.calibration",
    "Bisection": "privfed.dp.calibrator",
    "Bracket": "privfed.dp.calibrator",
    "Nudge": "privfed.dp.calibrator",
    "calibrate": "privfed.dp.calibrator",
    "calibrate_distributed_discrete_gaussian": "privfed.dp.distributed",
    "calibrate_distributed_skellam": "privfed.dp.distributed",
    "check_ring": "privfed.dp.distributed",
    "ddg_rdp": "privfed.dp.distributed",
    "ddg_zcdp": "privfed.dp.distributed",
    "log_wrap_probability": "privfed.dp.distributed",
    "min_honest_contributors": "privfed.dp.distributed",
    "skellam_rdp": "privfed.dp.distributed",
    "skellam_zcdp": "privfed.dp.distributed",
    "wrap_probability": "privfed.dp.distributed",
    "block_rdp": "privfed.dp.distributed_blocks",
    "block_zcdp": "privfed.dp.distributed_blocks",
    "calibrate_block_noise": "privfed.dp.distributed_blocks",
    "dropout_inflation": "privfed.dp.distributed_blocks",
    "DPSGDCalibration": "privfed.dp.dpsgd_calibration",
    "calibrate_dpsgd": "privfed.dp.dpsgd_calibration",
    "calibrate_noise_multiplier": "privfed.dp.dpsgd_calibration",
    "DEFAULT_SCHEME": "privfed.dp.events",
    "Accountant": "privfed.dp.events",
    "AccountantRelation": "privfed.dp.events",
    "Accounting": "privfed.dp.events",
    "Partition": "privfed.dp.events",
    "PartitionKey": "privfed.dp.events",
    "ReleaseEvent": "privfed.dp.events",
    "in_scheme": "privfed.dp.events",
    "partition_key": "privfed.dp.events",
    "LedgerGuarantee": "privfed.dp.ledger",
    "PrivacyLedger": "privfed.dp.ledger",
    "Release": "privfed.dp.ledger",
    "DISCRETE_GAUSSIAN_SAMPLER": "privfed.dp.noise",
    "GAUSSIAN_SAMPLER": "privfed.dp.noise",
    "ROUNDED_GAUSSIAN_SAMPLER": "privfed.dp.noise",
    "discrete_gaussian": "privfed.dp.noise",
    "gaussian_noise": "privfed.dp.noise",
    "rounded_gaussian": "privfed.dp.noise",
    "rdp_delta": "privfed.dp.rdp",
    "rdp_epsilon": "privfed.dp.rdp",
    "register_release": "privfed.dp.registry",
    "release_from_dict": "privfed.dp.registry",
    "release_kinds": "privfed.dp.registry",
    "EXACT_DISCRETE_GAUSSIAN_SAMPLER": "privfed.dp.samplers",
    "SKELLAM_SAMPLER": "privfed.dp.samplers",
    "exact_discrete_gaussian": "privfed.dp.samplers",
    "exact_poisson": "privfed.dp.samplers",
    "skellam_noise": "privfed.dp.samplers",
    "DistributedBlockRelease": "privfed.dp.releases.distributed_blocks",
    "DistributedDiscreteGaussianRelease": "privfed.dp.releases.distributed_gaussian",
    "DistributedSkellamRdpRelease": "privfed.dp.releases.distributed_skellam_rdp",
    "DistributedSkellamRelease": "privfed.dp.releases.distributed_skellam",
    "GaussianRelease": "privfed.dp.releases.gaussian",
    "SubsampledGaussianRelease": "privfed.dp.releases.subsampled_gaussian",
    "Adjacency": "privfed.dp.sensitivity",
    "count_sensitivity": "privfed.dp.sensitivity",
    "joint_mu_squared": "privfed.dp.sensitivity",
    "second_moment_sensitivity": "privfed.dp.sensitivity",
    "sum_sensitivity": "privfed.dp.sensitivity",
}

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
    "Bisection",
    "Bracket",
    "DPSGDCalibration",
    "DistributedBlockRelease",
    "DistributedDiscreteGaussianRelease",
    "DistributedSkellamRdpRelease",
    "DistributedSkellamRelease",
    "GaussianRelease",
    "LedgerGuarantee",
    "Nudge",
    "Partition",
    "PartitionKey",
    "PrivacyLedger",
    "Release",
    "ReleaseEvent",
    "SubsampledGaussianRelease",
    "block_rdp",
    "block_zcdp",
    "calibrate",
    "calibrate_analytic_gaussian",
    "calibrate_block_noise",
    "calibrate_distributed_discrete_gaussian",
    "calibrate_distributed_skellam",
    "calibrate_dpsgd",
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
    "log_wrap_probability",
    "min_honest_contributors",
    "mu_for_epsilon_delta",
    "partition_key",
    "rdp_delta",
    "rdp_epsilon",
    "register_release",
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

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
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
    from privfed.dp.calibrator import Bisection, Bracket, Nudge, calibrate
    from privfed.dp.distributed import (
        calibrate_distributed_discrete_gaussian,
        calibrate_distributed_skellam,
        check_ring,
        ddg_rdp,
        ddg_zcdp,
        log_wrap_probability,
        min_honest_contributors,
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
    from privfed.dp.dpsgd_calibration import (
        DPSGDCalibration,
        calibrate_dpsgd,
        calibrate_noise_multiplier,
    )
    from privfed.dp.events import (
        DEFAULT_SCHEME,
        Accountant,
        AccountantRelation,
        Accounting,
        Partition,
        PartitionKey,
        ReleaseEvent,
        in_scheme,
        partition_key,
    )
    from privfed.dp.ledger import LedgerGuarantee, PrivacyLedger, Release
    from privfed.dp.noise import (
        DISCRETE_GAUSSIAN_SAMPLER,
        GAUSSIAN_SAMPLER,
        ROUNDED_GAUSSIAN_SAMPLER,
        discrete_gaussian,
        gaussian_noise,
        rounded_gaussian,
    )
    from privfed.dp.rdp import rdp_delta, rdp_epsilon
    from privfed.dp.registry import register_release, release_from_dict, release_kinds
    from privfed.dp.releases.distributed_blocks import DistributedBlockRelease
    from privfed.dp.releases.distributed_gaussian import DistributedDiscreteGaussianRelease
    from privfed.dp.releases.distributed_skellam import DistributedSkellamRelease
    from privfed.dp.releases.distributed_skellam_rdp import DistributedSkellamRdpRelease
    from privfed.dp.releases.gaussian import GaussianRelease
    from privfed.dp.releases.subsampled_gaussian import SubsampledGaussianRelease
    from privfed.dp.samplers import (
        EXACT_DISCRETE_GAUSSIAN_SAMPLER,
        SKELLAM_SAMPLER,
        exact_discrete_gaussian,
        exact_poisson,
        skellam_noise,
    )
    from privfed.dp.sensitivity import (
        Adjacency,
        count_sensitivity,
        joint_mu_squared,
        second_moment_sensitivity,
        sum_sensitivity,
    )
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``.
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
