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

from privfed._lazy import lazy_exports, public_names

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

if TYPE_CHECKING:  # pragma: no cover - the static view of the lazy names
    from privfed.dp.calibration import calibrate_analytic_gaussian as calibrate_analytic_gaussian
    from privfed.dp.calibration import compose_gdp as compose_gdp
    from privfed.dp.calibration import gaussian_delta as gaussian_delta
    from privfed.dp.calibration import gaussian_epsilon as gaussian_epsilon
    from privfed.dp.calibration import gdp_delta as gdp_delta
    from privfed.dp.calibration import gdp_epsilon as gdp_epsilon
    from privfed.dp.calibration import gdp_mu as gdp_mu
    from privfed.dp.calibration import mu_for_epsilon_delta as mu_for_epsilon_delta
    from privfed.dp.calibrator import Bisection as Bisection
    from privfed.dp.calibrator import Bracket as Bracket
    from privfed.dp.calibrator import Nudge as Nudge
    from privfed.dp.calibrator import calibrate as calibrate
    from privfed.dp.distributed import (
        calibrate_distributed_discrete_gaussian as calibrate_distributed_discrete_gaussian,
    )
    from privfed.dp.distributed import (
        calibrate_distributed_skellam as calibrate_distributed_skellam,
    )
    from privfed.dp.distributed import check_ring as check_ring
    from privfed.dp.distributed import ddg_rdp as ddg_rdp
    from privfed.dp.distributed import ddg_zcdp as ddg_zcdp
    from privfed.dp.distributed import log_wrap_probability as log_wrap_probability
    from privfed.dp.distributed import min_honest_contributors as min_honest_contributors
    from privfed.dp.distributed import skellam_rdp as skellam_rdp
    from privfed.dp.distributed import skellam_zcdp as skellam_zcdp
    from privfed.dp.distributed import wrap_probability as wrap_probability
    from privfed.dp.distributed_blocks import block_rdp as block_rdp
    from privfed.dp.distributed_blocks import block_zcdp as block_zcdp
    from privfed.dp.distributed_blocks import calibrate_block_noise as calibrate_block_noise
    from privfed.dp.distributed_blocks import dropout_inflation as dropout_inflation
    from privfed.dp.dpsgd_calibration import DPSGDCalibration as DPSGDCalibration
    from privfed.dp.dpsgd_calibration import calibrate_dpsgd as calibrate_dpsgd
    from privfed.dp.dpsgd_calibration import (
        calibrate_noise_multiplier as calibrate_noise_multiplier,
    )
    from privfed.dp.events import DEFAULT_SCHEME as DEFAULT_SCHEME
    from privfed.dp.events import Accountant as Accountant
    from privfed.dp.events import AccountantRelation as AccountantRelation
    from privfed.dp.events import Accounting as Accounting
    from privfed.dp.events import Partition as Partition
    from privfed.dp.events import PartitionKey as PartitionKey
    from privfed.dp.events import ReleaseEvent as ReleaseEvent
    from privfed.dp.events import in_scheme as in_scheme
    from privfed.dp.events import partition_key as partition_key
    from privfed.dp.ledger import LedgerGuarantee as LedgerGuarantee
    from privfed.dp.ledger import PrivacyLedger as PrivacyLedger
    from privfed.dp.ledger import Release as Release
    from privfed.dp.noise import DISCRETE_GAUSSIAN_SAMPLER as DISCRETE_GAUSSIAN_SAMPLER
    from privfed.dp.noise import GAUSSIAN_SAMPLER as GAUSSIAN_SAMPLER
    from privfed.dp.noise import ROUNDED_GAUSSIAN_SAMPLER as ROUNDED_GAUSSIAN_SAMPLER
    from privfed.dp.noise import discrete_gaussian as discrete_gaussian
    from privfed.dp.noise import gaussian_noise as gaussian_noise
    from privfed.dp.noise import rounded_gaussian as rounded_gaussian
    from privfed.dp.rdp import rdp_delta as rdp_delta
    from privfed.dp.rdp import rdp_epsilon as rdp_epsilon
    from privfed.dp.registry import register_release as register_release
    from privfed.dp.registry import release_from_dict as release_from_dict
    from privfed.dp.registry import release_kinds as release_kinds
    from privfed.dp.releases.distributed_blocks import (
        DistributedBlockRelease as DistributedBlockRelease,
    )
    from privfed.dp.releases.distributed_gaussian import (
        DistributedDiscreteGaussianRelease as DistributedDiscreteGaussianRelease,
    )
    from privfed.dp.releases.distributed_skellam import (
        DistributedSkellamRelease as DistributedSkellamRelease,
    )
    from privfed.dp.releases.distributed_skellam_rdp import (
        DistributedSkellamRdpRelease as DistributedSkellamRdpRelease,
    )
    from privfed.dp.releases.gaussian import GaussianRelease as GaussianRelease
    from privfed.dp.releases.subsampled_gaussian import (
        SubsampledGaussianRelease as SubsampledGaussianRelease,
    )
    from privfed.dp.samplers import (
        EXACT_DISCRETE_GAUSSIAN_SAMPLER as EXACT_DISCRETE_GAUSSIAN_SAMPLER,
    )
    from privfed.dp.samplers import SKELLAM_SAMPLER as SKELLAM_SAMPLER
    from privfed.dp.samplers import exact_discrete_gaussian as exact_discrete_gaussian
    from privfed.dp.samplers import exact_poisson as exact_poisson
    from privfed.dp.samplers import skellam_noise as skellam_noise
    from privfed.dp.sensitivity import Adjacency as Adjacency
    from privfed.dp.sensitivity import count_sensitivity as count_sensitivity
    from privfed.dp.sensitivity import joint_mu_squared as joint_mu_squared
    from privfed.dp.sensitivity import second_moment_sensitivity as second_moment_sensitivity
    from privfed.dp.sensitivity import sum_sensitivity as sum_sensitivity
else:
    # Hidden from type checkers, so that a name missing from the imports above is
    # an error for them rather than an ``Any`` from a module ``__getattr__``; the
    # imports' ``X as X`` is what exports each name to them.
    __all__ = public_names(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)
