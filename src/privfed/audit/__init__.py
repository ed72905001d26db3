"""privfed.audit: membership-inference audits with numbers that hold up.

Score convention everywhere: **higher score means "more likely a member"**.

Pure layer (numpy + scipy + privfed.dp; never torch).  scipy is imported by the
functions that use it, so ``import privfed.audit`` loads neither scipy.stats nor
scipy.special:

* :mod:`~privfed.audit.metrics` -- ROC, AUC and TPR at fixed FPRs, each with a
  confidence interval (Clopper–Pearson, DeLong or seeded bootstrap).
* :mod:`~privfed.audit.bounds` -- ε and μ lower bounds with stated
  significance and an explicit threshold-selection rule, and the one-run bound
  of Steinke, Nasr & Jagielski (arXiv:2305.08846); every bound states its
  statistical model (:class:`TrialModel`).
* :mod:`~privfed.audit.one_run` -- one-run audits with the guess rule chosen
  on a held-out half or over a declared grid (Bonferroni).
* :mod:`~privfed.audit.gradient_canaries` -- white-box Dirac gradient canaries
  for DP-SGD loops (privfed's ``dp_sgd_step(..., canaries=)`` or your own),
  audited in one run.
* :mod:`~privfed.audit.splits` -- held-out bounds on seeded random splits of
  one set of scores, repeated over K splits.
* :mod:`~privfed.audit.canary_clients` -- canary clients for federated
  training (Andrew et al. 2024): the one-shot ε *estimate* of one run.
* :mod:`~privfed.audit.canary` -- canary audit of privfed's own Gaussian
  latent-statistic release with the optimal attack.
* :mod:`~privfed.audit.synthetic` -- attacks on synthetic data and released
  latent Gaussians, and :func:`audit_synthetic_release`.
* :mod:`~privfed.audit.reference` -- LiRA and RMIA on scores from any
  ``train_fn(indices)``.
* :mod:`~privfed.audit.generative` -- denoising-loss and reconstruction attacks
  on per-client generative models, through plain callables.
* :mod:`~privfed.audit.report` -- ``audit.json`` / ``audit.md`` / ``roc.png``.

Torch layer, loaded on first use: :mod:`~privfed.audit.torch_scoring`
(``privfed.audit.torch_scoring`` or the names it exports, e.g.
``privfed.audit.true_class_probabilities``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from privfed.audit.bounds import (
    HALF_SPLIT,
    BoundObjective,
    BoundSpec,
    HeldOutSplit,
    OneRunAudit,
    PrivacyLowerBound,
    ThresholdSelection,
    TrialModel,
    empirical_privacy_lower_bound,
    epsilon_lower_bound_from_rates,
    lower_bound_at_threshold,
    lower_bound_bonferroni,
    lower_bound_held_out,
    mu_lower_bound_from_rates,
    one_run_audit,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)
from privfed.audit.canary import (
    RELEASE_CODE_TRIALS,
    SIMULATED_LABEL,
    SIMULATION_TRIALS,
    AuditTrials,
    CanaryAuditResult,
    CanaryGame,
    CanaryRelease,
    LatentCanaryNoise,
    NoiseSampler,
    ReleaseComponent,
    SimulationMode,
    audit_canary_game,
    audit_gaussian_mechanism,
    audit_gaussian_release,
    audit_latent_release,
    worst_case_latent_canary,
    worst_case_latent_records,
)
from privfed.audit.canary_clients import (
    CANARY_CLIENT_MODEL,
    CanaryClientEstimate,
    CanaryClients,
    CanaryEstimateSpec,
    audit_training_run,
    canary_client_epsilon,
)
from privfed.audit.generative import (
    DenoiseFn,
    DenoisingLoss,
    ReconstructFn,
    denoising_loss_scores,
    reconstruction_error_scores,
)
from privfed.audit.gradient_canaries import CanaryAdjacency, DiracGradientCanaries
from privfed.audit.metrics import (
    DEFAULT_FPRS,
    DELONG_INTERVAL,
    AucInterval,
    AucIntervalMethod,
    ConfidenceInterval,
    MembershipMetrics,
    RocCurve,
    TprAtFpr,
    auc_score,
    auc_with_interval,
    clopper_pearson,
    membership_metrics,
    roc_curve,
    tpr_at_fpr,
)
from privfed.audit.one_run import (
    DEFAULT_GUESS_FRACTIONS,
    DEFAULT_IN_FRACTIONS,
    OneRunSelection,
    one_run_audit_selected,
)
from privfed.audit.reference import (
    ReferenceAttack,
    ReferenceAttackResult,
    TrainFn,
    lira_scores,
    logit_scaled_confidence,
    reference_model_attack,
    rmia_scores,
)
from privfed.audit.report import ReportPaths, render_markdown, write_audit_report
from privfed.audit.splits import SplitBounds, lower_bound_random_split, repeated_split_bounds
from privfed.audit.synthetic import (
    DensityModel,
    SyntheticAttack,
    SyntheticAttackResult,
    SyntheticReleaseAudit,
    audit_synthetic_release,
    density_ratio_scores,
    distance_to_closest_record_scores,
    gaussian_log_density,
    latent_gaussian_likelihood_ratio_scores,
    noisy_sum_likelihood_ratio_scores,
)

if TYPE_CHECKING:  # pragma: no cover
    from privfed.audit import torch_scoring
    from privfed.audit.torch_scoring import (
        classifier_train_fn,
        numpy_callable,
        per_example_losses,
        true_class_probabilities,
    )

__all__ = [
    "CANARY_CLIENT_MODEL",
    "DEFAULT_FPRS",
    "DEFAULT_GUESS_FRACTIONS",
    "DEFAULT_IN_FRACTIONS",
    "DELONG_INTERVAL",
    "HALF_SPLIT",
    "RELEASE_CODE_TRIALS",
    "SIMULATED_LABEL",
    "SIMULATION_TRIALS",
    "AucInterval",
    "AucIntervalMethod",
    "AuditTrials",
    "BoundObjective",
    "BoundSpec",
    "CanaryAdjacency",
    "CanaryAuditResult",
    "CanaryClientEstimate",
    "CanaryClients",
    "CanaryEstimateSpec",
    "CanaryGame",
    "CanaryRelease",
    "ConfidenceInterval",
    "DenoiseFn",
    "DenoisingLoss",
    "DensityModel",
    "DiracGradientCanaries",
    "HeldOutSplit",
    "LatentCanaryNoise",
    "MembershipMetrics",
    "NoiseSampler",
    "OneRunAudit",
    "OneRunSelection",
    "PrivacyLowerBound",
    "ReconstructFn",
    "ReferenceAttack",
    "ReferenceAttackResult",
    "ReleaseComponent",
    "ReportPaths",
    "RocCurve",
    "SimulationMode",
    "SplitBounds",
    "SyntheticAttack",
    "SyntheticAttackResult",
    "SyntheticReleaseAudit",
    "ThresholdSelection",
    "TprAtFpr",
    "TrainFn",
    "TrialModel",
    "auc_score",
    "auc_with_interval",
    "audit_canary_game",
    "audit_gaussian_mechanism",
    "audit_gaussian_release",
    "audit_latent_release",
    "audit_synthetic_release",
    "audit_training_run",
    "canary_client_epsilon",
    "classifier_train_fn",
    "clopper_pearson",
    "denoising_loss_scores",
    "density_ratio_scores",
    "distance_to_closest_record_scores",
    "empirical_privacy_lower_bound",
    "epsilon_lower_bound_from_rates",
    "gaussian_log_density",
    "latent_gaussian_likelihood_ratio_scores",
    "lira_scores",
    "logit_scaled_confidence",
    "lower_bound_at_threshold",
    "lower_bound_bonferroni",
    "lower_bound_held_out",
    "lower_bound_random_split",
    "membership_metrics",
    "mu_lower_bound_from_rates",
    "noisy_sum_likelihood_ratio_scores",
    "numpy_callable",
    "one_run_audit",
    "one_run_audit_selected",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
    "per_example_losses",
    "reconstruction_error_scores",
    "reference_model_attack",
    "render_markdown",
    "repeated_split_bounds",
    "rmia_scores",
    "roc_curve",
    "torch_scoring",
    "tpr_at_fpr",
    "true_class_probabilities",
    "worst_case_latent_canary",
    "worst_case_latent_records",
    "write_audit_report",
]

_TORCH_NAMES = frozenset(
    {"classifier_train_fn", "numpy_callable", "per_example_losses", "true_class_probabilities"}
)


def __getattr__(name: str) -> Any:
    if name == "torch_scoring":
        return importlib.import_module("privfed.audit.torch_scoring")
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module("privfed.audit.torch_scoring"), name)
    raise AttributeError(f"module 'privfed.audit' has no attribute {name!r}")
