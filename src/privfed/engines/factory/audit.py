"""Membership-inference audit of trained factories (torch adapters over :mod:`privfed.audit`).

For one factory (one cell ``(class c, client k)`` of the matrix) the members
are the images it was trained on and the non-members are real images of the
same class that no factory ever saw (in the pipeline: the held-out test
split).  Each attack turns the factory into a score per image, higher meaning
"more likely a member":

* ``"denoising-loss"`` (:class:`~privfed.engines.factory.edm.EDMDiffusionFactory`):
  minus the EDM denoiser's squared error averaged over a fixed, pre-declared
  grid of noise levels (Carlini et al. 2023, arXiv:2301.13188, §5), through
  :func:`privfed.audit.denoising_loss_scores`;
* ``"log-likelihood"`` (:class:`~privfed.engines.factory.gaussian.LatentGaussianFactory`):
  the model's log density (pixel space for private PCA, codec-latent space
  for a public codec) -- for a Gaussian model this is the likelihood-ratio
  attack up to a term that does not depend on the factory;
* ``"reconstruction"`` (private-PCA Gaussian factories only): minus the
  reconstruction error through the *private* principal directions, through
  :func:`privfed.audit.reconstruction_error_scores`.

Every attack is reported with :func:`privfed.audit.membership_metrics` (AUC
with a DeLong interval, TPR at each requested FPR with a Clopper–Pearson
interval and a flag when the non-members are too few to resolve that FPR)
and an (ε, δ)/μ-GDP lower bound from :func:`privfed.audit.lower_bound_held_out`:
members and non-members are each split at random (seeded) into a calibration
part, on which the threshold is chosen, and a disjoint evaluation part, on
which the bound is computed.

Multiple testing: an audit of many factories reports the largest bound, so
the family-wise significance α (:attr:`FactoryAuditConfig.significance`) is
split evenly (Bonferroni) over every (factory, attack) pair; each individual
bound holds at α/m and the maximum over all of them at α.

These are *empirical lower bounds*: a small bound does not show that a
factory is private (the factories here have no formal guarantee unless
trained with DP-SGD); a large one proves it is not.  With the few dozen
non-members per class of the digits test split, AUC intervals are about
±0.1 wide and FPRs below ~5 % are not resolvable -- the report says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
import torch
from numpy.typing import NDArray

from privfed._checks import check_choice, check_float, check_int, check_probability
from privfed._records import field_dict
from privfed.audit import (
    BoundSpec,
    MembershipMetrics,
    PrivacyLowerBound,
    auc_score,
    denoising_loss_scores,
    lower_bound_held_out,
    membership_metrics,
    reconstruction_error_scores,
)
from privfed.engines.factory.base import ClientId, validate_images
from privfed.engines.factory.edm import EDMDiffusionFactory
from privfed.engines.factory.gaussian import LatentGaussianFactory
from privfed.errors import AuditError, ParameterError, ParameterTypeError

__all__ = [
    "AttackAudit",
    "FactoryAttack",
    "FactoryAudit",
    "FactoryAuditConfig",
    "FactoryAuditReport",
    "attacks_for",
    "audit_factories",
    "audit_factory",
    "factory_attack_scores",
    "numpy_denoiser",
]

#: Membership attacks on a factory (see the module docstring).
FactoryAttack = Literal["denoising-loss", "log-likelihood", "reconstruction"]

_ATTACKS: tuple[str, ...] = ("denoising-loss", "log-likelihood", "reconstruction")


@dataclass(frozen=True)
class FactoryAuditConfig:
    """How factories are audited (defaults keep a 10-factory audit to seconds on a CPU).

    Attributes:
        max_factories: Most factories audited (>= 1); the pipeline picks them
            round-robin over classes so that every class is covered first.
        max_records: Most members and most non-members scored per factory
            (>= 4 each), drawn at random (seeded) when there are more.
        noise_stds: Noise levels of the denoising-loss attack, standard
            deviations in image units (pixels in ``[0, 1]``), each finite and
            > 0, fixed before looking at any score.  The defaults span the
            central part of the EDM training distribution (``ln σ ~ N(−1.2,
            1.2²)`` in ``[−1, 1]`` units, i.e. image-unit σ of about
            0.045–0.5 within one standard deviation).
        num_noise_draws: Noise draws averaged per (image, noise level), >= 1.
        fprs: FPRs at which the TPR is reported, each in (0, 1).
        confidence: Coverage of the AUC and TPR intervals, in (0, 1).
        significance: Family-wise α in (0, 1) of the lower bounds, split
            evenly over every audited (factory, attack) pair.
        delta: δ in (0, 1) of the ε lower bound.
        objective: What the held-out threshold search maximises: ``"epsilon"``
            or ``"mu"`` (both bounds are reported either way).
        calibration_fraction: Fraction in (0, 1) of members and of
            non-members used to choose the threshold (the rest evaluates it).
        batch_size: Images per model call, >= 1.
        seed: Seed of record subsampling, calibration split and noise draws
            (an experiment seed: nothing here protects privacy).
    """

    max_factories: int = 10
    max_records: int = 256
    noise_stds: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
    num_noise_draws: int = 1
    fprs: tuple[float, ...] = (0.1, 0.01, 0.001)
    confidence: float = 0.95
    significance: float = 0.05
    delta: float = 1e-5
    objective: Literal["epsilon", "mu"] = "epsilon"
    calibration_fraction: float = 0.5
    batch_size: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("max_factories", self.max_factories, minimum=1, expected=None)
        check_int("max_records", self.max_records, minimum=4, expected=None)
        if not isinstance(self.noise_stds, tuple) or not self.noise_stds:
            raise ParameterTypeError("noise_stds", "a non-empty tuple of floats", self.noise_stds)
        for i, s in enumerate(self.noise_stds):
            check_float(f"noise_stds[{i}]", s, low=0, open_low=True, numpy=False, expected=None)
        check_int("num_noise_draws", self.num_noise_draws, minimum=1, expected=None)
        if not isinstance(self.fprs, tuple) or not self.fprs:
            raise ParameterTypeError("fprs", "a non-empty tuple of floats", self.fprs)
        for i, f in enumerate(self.fprs):
            check_probability(f"fprs[{i}]", f, numpy=False, expected=None)
        check_probability("confidence", self.confidence, numpy=False, expected=None)
        check_probability("significance", self.significance, numpy=False, expected=None)
        check_probability("delta", self.delta, numpy=False, expected=None)
        check_choice("objective", self.objective, ("epsilon", "mu"))
        check_probability(
            "calibration_fraction", self.calibration_fraction, numpy=False, expected=None
        )
        check_int("batch_size", self.batch_size, minimum=1, expected=None)
        check_int("seed", self.seed, minimum=0, expected=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {**field_dict(self), "noise_stds": list(self.noise_stds), "fprs": list(self.fprs)}


@dataclass(frozen=True)
class AttackAudit:
    """One attack on one factory.

    Attributes:
        attack: The attack's name (:data:`FactoryAttack`).
        metrics: AUC and TPR-at-FPR with intervals, on all scored records.
        bound: ε/μ lower bound with the held-out threshold rule, at the
            per-test significance (``bound.significance``).
        auc_per_noise_std: Denoising loss only: AUC at each noise level of
            :attr:`FactoryAuditConfig.noise_stds` (point estimates, for
            diagnosis; picking the best one on these data would be optimistic).
    """

    attack: str
    metrics: MembershipMetrics
    bound: PrivacyLowerBound
    auc_per_noise_std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check_choice("attack", self.attack, _ATTACKS, domain=f"one of {_ATTACKS}")
        if not isinstance(self.metrics, MembershipMetrics):
            raise ParameterTypeError("metrics", "a MembershipMetrics", self.metrics)
        if not isinstance(self.bound, PrivacyLowerBound):
            raise ParameterTypeError("bound", "a PrivacyLowerBound", self.bound)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (without the ROC curve)."""
        return {
            "attack": self.attack,
            "metrics": self.metrics.to_dict(include_roc=False),
            "bound": self.bound.to_dict(),
            "auc_per_noise_std": None
            if self.auc_per_noise_std is None
            else list(self.auc_per_noise_std),
        }


@dataclass(frozen=True)
class FactoryAudit:
    """Audit of one factory.

    Attributes:
        class_id: Class of the factory (``None`` if unassigned).
        client_id: Client that trained it (``None`` if unassigned).
        factory_type: ``"edm-diffusion"`` or ``"latent-gaussian"``.
        basis: For Gaussian factories ``"private-pca"`` or ``"public-codec"``,
            otherwise ``None``.
        num_members: Member images scored.
        num_nonmembers: Non-member images scored.
        attacks: One entry per attack run.
        seconds: Wall-clock seconds of scoring and metrics.
    """

    class_id: int | None
    client_id: ClientId | None
    factory_type: str
    basis: str | None
    num_members: int
    num_nonmembers: int
    attacks: tuple[AttackAudit, ...]
    seconds: float

    def __post_init__(self) -> None:
        check_int("num_members", self.num_members, minimum=4, expected=None)
        check_int("num_nonmembers", self.num_nonmembers, minimum=4, expected=None)
        if not self.attacks or not all(isinstance(a, AttackAudit) for a in self.attacks):
            raise ParameterError("attacks", "a non-empty tuple of AttackAudit", self.attacks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {**field_dict(self), "attacks": [a.to_dict() for a in self.attacks]}


@dataclass(frozen=True)
class FactoryAuditReport:
    """Audit of several factories, with the multiple-testing correction stated.

    Attributes:
        config: The audit configuration.
        factories: Per-factory audits, in audit order.
        skipped: ``(cell, reason)`` for every requested factory not audited
            (e.g. fewer than 4 members or non-members).
        per_test_significance: α / m, the significance each individual bound
            was computed at (m = number of (factory, attack) pairs).
        seconds: Wall-clock seconds of the whole audit.
    """

    config: FactoryAuditConfig
    factories: tuple[FactoryAudit, ...]
    skipped: tuple[tuple[str, str], ...]
    per_test_significance: float
    seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.config, FactoryAuditConfig):
            raise ParameterTypeError("config", "a FactoryAuditConfig", self.config)
        check_probability(
            "per_test_significance", self.per_test_significance, numpy=False, expected=None
        )

    def summary(self) -> dict[str, Any]:
        """Worst case over audited factories, per attack.

        Returns:
            ``{attack: {"factories", "max_auc", "max_auc_cell", "mean_auc",
            "max_epsilon_lower_bound", "max_mu_lower_bound",
            "largest_possible_epsilon_lower_bound"}}`` (the last: the largest
            ε lower bound a perfect attack could have shown on any audited
            factory, the test's power).  The maxima
            of the bounds hold at the family-wise confidence
            ``1 − config.significance``; ``max_auc`` is a point estimate.
        """
        out: dict[str, Any] = {}
        for name in _ATTACKS:
            rows = [(f, a) for f in self.factories for a in f.attacks if a.attack == name]
            if not rows:
                continue
            aucs = [a.metrics.auc.estimate for _, a in rows]
            worst_f, _ = rows[int(np.argmax(aucs))]
            out[name] = {
                "factories": len(rows),
                "max_auc": max(aucs),
                "max_auc_cell": f"class={worst_f.class_id}/client={worst_f.client_id}",
                "mean_auc": float(np.mean(aucs)),
                "max_epsilon_lower_bound": max(a.bound.epsilon_lower_bound for _, a in rows),
                "max_mu_lower_bound": max(a.bound.mu_lower_bound for _, a in rows),
                # The power: the most a perfect attack could show on the largest audited cell.
                "largest_possible_epsilon_lower_bound": max(
                    a.bound.largest_possible_epsilon for _, a in rows
                ),
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary: configuration, summary, per-factory audits, skips."""
        return {
            "config": self.config.to_dict(),
            "family_significance": self.config.significance,
            "per_test_significance": self.per_test_significance,
            "threshold_selection": "held-out",
            "summary": self.summary(),
            "factories": [f.to_dict() for f in self.factories],
            "skipped": [{"cell": c, "reason": r} for c, r in self.skipped],
            "seconds": self.seconds,
        }


# -- scoring ------------------------------------------------------------------------


def numpy_denoiser(
    factory: EDMDiffusionFactory,
) -> Callable[[NDArray[np.float64], float], NDArray[np.float64]]:
    """Wrap :meth:`EDMDiffusionFactory.denoise` as a numpy ``denoise(x_noisy, sigma)``.

    ``sigma`` is the noise standard deviation in image units (pixels in
    ``[0, 1]``), as :func:`privfed.audit.denoising_loss_scores` adds it.

    Args:
        factory: A fitted EDM factory.

    Returns:
        A callable mapping a float64 array ``(B, C, H, W)`` and a float to a
        float64 array of the same shape.
    """
    if not isinstance(factory, EDMDiffusionFactory):
        raise ParameterTypeError("factory", "an EDMDiffusionFactory", factory)
    if not factory.is_fitted:
        raise ParameterError("factory", "a fitted factory", "unfitted")

    def denoise(x_noisy: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
        x = torch.from_numpy(np.ascontiguousarray(x_noisy, dtype=np.float32))
        return factory.denoise(x, float(sigma)).double().numpy()

    return denoise


def attacks_for(factory: object) -> tuple[str, ...]:
    """The attacks that apply to ``factory`` (first one = primary).

    Returns:
        ``("denoising-loss",)`` for EDM factories; ``("log-likelihood",
        "reconstruction")`` for private-PCA Gaussian factories;
        ``("log-likelihood",)`` for public-codec Gaussian factories (their
        reconstruction goes through the public codec only and carries no
        membership signal about the factory).

    Raises:
        ParameterTypeError: An unsupported factory type.
    """
    if isinstance(factory, EDMDiffusionFactory):
        return ("denoising-loss",)
    if isinstance(factory, LatentGaussianFactory):
        if factory.basis == "private-pca":
            return ("log-likelihood", "reconstruction")
        return ("log-likelihood",)
    if getattr(factory, "factory_type", None) == "latent-mixture":  # public codec, no import
        return ("log-likelihood",)
    raise ParameterTypeError(
        "factory", "an EDMDiffusionFactory or LatentGaussianFactory", type(factory).__name__
    )


def _denoising(
    factory: EDMDiffusionFactory, images: torch.Tensor, config: FactoryAuditConfig
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    result = denoising_loss_scores(
        images.double().numpy(),
        numpy_denoiser(factory),
        np.asarray(config.noise_stds, dtype=np.float64),
        num_noise_draws=config.num_noise_draws,
        batch_size=config.batch_size,
        seed=config.seed,
    )
    return result.scores, -result.losses


def factory_attack_scores(
    factory: EDMDiffusionFactory | LatentGaussianFactory,
    images: torch.Tensor,
    attack: FactoryAttack,
    *,
    config: FactoryAuditConfig | None = None,
) -> NDArray[np.float64]:
    """Membership scores of ``images`` under one attack (higher ⇒ more member-like).

    Deterministic for a given ``config.seed`` (the denoising noise draws
    come from it).

    Args:
        factory: A fitted factory the attack applies to (:func:`attacks_for`).
        images: float ``(N, C, H, W)`` in ``[0, 1]``, N >= 1.
        attack: The attack.
        config: Noise levels, draws, batch size and seed (defaults if ``None``).

    Returns:
        float64 array ``(N,)``.

    Raises:
        ParameterError: The attack does not apply to this factory, or it is not fitted.
        AuditError: The model produced non-finite scores.
    """
    cfg = config if config is not None else FactoryAuditConfig()
    if not isinstance(cfg, FactoryAuditConfig):
        raise ParameterTypeError("config", "a FactoryAuditConfig or None", cfg)
    allowed = attacks_for(factory)
    check_choice("attack", attack, allowed, domain=f"one of {allowed} for this factory")
    if not factory.is_fitted:
        raise ParameterError("factory", "a fitted factory", "unfitted")
    data = validate_images(images)
    # attacks_for has checked that the attack matches the factory's type.
    if attack == "denoising-loss":
        scores, _ = _denoising(cast(EDMDiffusionFactory, factory), data, cfg)
    elif attack == "log-likelihood":
        gauss = cast(LatentGaussianFactory, factory)
        scores = gauss.log_likelihood(data).numpy().astype(np.float64)
    else:
        gauss = cast(LatentGaussianFactory, factory)

        def reconstruct(x: NDArray[np.float64]) -> NDArray[np.float64]:
            block = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
            return gauss.reconstruct(block).double().numpy()

        scores = reconstruction_error_scores(
            data.double().numpy(), reconstruct, batch_size=cfg.batch_size
        )
    if not np.all(np.isfinite(scores)):
        raise AuditError("factory produced non-finite membership scores")
    return np.asarray(scores, dtype=np.float64)


def _subsample(n: int, cap: int, rng: np.random.Generator) -> NDArray[np.int64]:
    if n <= cap:
        return np.arange(n, dtype=np.int64)
    return np.sort(rng.choice(n, size=cap, replace=False)).astype(np.int64)


def _split(n: int, fraction: float, rng: np.random.Generator) -> tuple[NDArray[np.int64], ...]:
    order = rng.permutation(n)
    cut = min(max(2, round(fraction * n)), n - 2)
    return np.sort(order[:cut]), np.sort(order[cut:])


def audit_factory(
    factory: EDMDiffusionFactory | LatentGaussianFactory,
    members: torch.Tensor,
    nonmembers: torch.Tensor,
    *,
    config: FactoryAuditConfig | None = None,
    significance: float | None = None,
    class_id: int | None = None,
    client_id: ClientId | None = None,
) -> FactoryAudit:
    """Run every applicable attack on one factory and bound its leakage.

    Threat model: the auditor holds the shipped factory (white-box access to
    its weights, as the server does) and a pool of candidate images, and
    guesses which were in the factory's training set.  ``nonmembers`` must be
    images of the same distribution (same class) that the factory never saw;
    otherwise the numbers measure a distribution shift, not membership.

    Args:
        factory: A fitted factory (see :func:`attacks_for`).
        members: Its training images, float ``(N1, C, H, W)`` in ``[0, 1]``, N1 >= 4.
        nonmembers: Held-out images, float ``(N0, C, H, W)``, N0 >= 4.
        config: Audit settings (defaults if ``None``).
        significance: α of each bound, in (0, 1); ``None`` uses
            ``config.significance`` divided by the number of attacks run.
        class_id: Recorded in the result (defaults to the factory's).
        client_id: Recorded in the result (defaults to the factory's).

    Returns:
        A :class:`FactoryAudit`.

    Raises:
        ParameterError: Too few records, shapes that differ, or bad settings.
    """
    cfg = config if config is not None else FactoryAuditConfig()
    if not isinstance(cfg, FactoryAuditConfig):
        raise ParameterTypeError("config", "a FactoryAuditConfig or None", cfg)
    attacks = attacks_for(factory)
    if not factory.is_fitted:
        raise ParameterError("factory", "a fitted factory", "unfitted")
    mem = validate_images(members, "members", min_count=4)
    non = validate_images(nonmembers, "nonmembers", min_count=4)
    if mem.shape[1:] != non.shape[1:]:
        raise ParameterError(
            "nonmembers", f"images of shape {tuple(mem.shape[1:])}", tuple(non.shape[1:])
        )
    alpha = (
        cfg.significance / len(attacks)
        if significance is None
        else check_probability("significance", significance, numpy=False, expected=None)
    )
    start = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    mem = mem[torch.from_numpy(_subsample(mem.shape[0], cfg.max_records, rng))]
    non = non[torch.from_numpy(_subsample(non.shape[0], cfg.max_records, rng))]
    cal_m, ev_m = _split(mem.shape[0], cfg.calibration_fraction, rng)
    cal_n, ev_n = _split(non.shape[0], cfg.calibration_fraction, rng)
    results = []
    for attack in attacks:
        per_noise: tuple[float, ...] | None = None
        if attack == "denoising-loss":
            edm = cast(EDMDiffusionFactory, factory)  # attacks_for checked the type
            s_m, per_m = _denoising(edm, mem, cfg)
            s_n, per_n = _denoising(edm, non, cfg)
            per_noise = tuple(auc_score(per_m[:, t], per_n[:, t]) for t in range(per_m.shape[1]))
        else:
            name = cast(FactoryAttack, attack)
            s_m = factory_attack_scores(factory, mem, name, config=cfg)
            s_n = factory_attack_scores(factory, non, name, config=cfg)
        metrics = membership_metrics(s_m, s_n, fprs=cfg.fprs, confidence=cfg.confidence)
        bound = lower_bound_held_out(
            s_m[cal_m],
            s_n[cal_n],
            s_m[ev_m],
            s_n[ev_n],
            spec=BoundSpec(cfg.delta, alpha),
            objective=cfg.objective,
        )
        results.append(AttackAudit(attack, metrics, bound, per_noise))
    basis = factory.basis if isinstance(factory, LatentGaussianFactory) else None
    return FactoryAudit(
        class_id=factory.class_id if class_id is None else class_id,
        client_id=factory.client_id if client_id is None else client_id,
        factory_type=factory.factory_type,
        basis=basis,
        num_members=int(mem.shape[0]),
        num_nonmembers=int(non.shape[0]),
        attacks=tuple(results),
        seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class _Target:
    class_id: int
    client_id: ClientId
    factory: Any
    members: torch.Tensor
    nonmembers: torch.Tensor = field(repr=False)


def audit_factories(
    targets: Sequence[tuple[int, ClientId, Any, torch.Tensor, torch.Tensor]],
    *,
    config: FactoryAuditConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FactoryAuditReport:
    """Audit several factories with a family-wise significance.

    At most ``config.max_factories`` targets are audited, in the order given;
    targets with fewer than 4 members or 4 non-members are skipped with a
    reason.  The significance ``config.significance`` is split evenly over all
    (factory, attack) pairs actually run, so the largest bound in the report
    holds at confidence ``1 − config.significance``.

    Args:
        targets: ``(class_id, client_id, factory, members, nonmembers)`` per
            factory; images as in :func:`audit_factory`.
        config: Audit settings (defaults if ``None``).
        progress: Optional ``progress(done, total)`` after each factory.

    Returns:
        A :class:`FactoryAuditReport`.

    Raises:
        ParameterError: No target can be audited, or a malformed target.
    """
    cfg = config if config is not None else FactoryAuditConfig()
    if not isinstance(cfg, FactoryAuditConfig):
        raise ParameterTypeError("config", "a FactoryAuditConfig or None", cfg)
    if isinstance(targets, str | bytes) or not isinstance(targets, Sequence):
        raise ParameterTypeError("targets", "a sequence of 5-tuples", targets)
    chosen: list[_Target] = []
    skipped: list[tuple[str, str]] = []
    for i, item in enumerate(targets):
        if not isinstance(item, tuple) or len(item) != 5:
            raise ParameterTypeError(f"targets[{i}]", "a 5-tuple", item)
        c, k, factory, mem, non = item
        attacks_for(factory)
        cell = f"class={c}/client={k}"
        if len(chosen) >= cfg.max_factories:
            skipped.append((cell, f"beyond max_factories={cfg.max_factories}"))
        elif int(mem.shape[0]) < 4 or int(non.shape[0]) < 4:
            skipped.append(
                (cell, f"needs >= 4 members and non-members, has {mem.shape[0]} / {non.shape[0]}")
            )
        else:
            chosen.append(_Target(int(c), k, factory, mem, non))
    if not chosen:
        raise ParameterError("targets", "at least one factory with >= 4 members and non-members", 0)
    tests = sum(len(attacks_for(t.factory)) for t in chosen)
    alpha = cfg.significance / tests
    start = time.perf_counter()
    audits = []
    for done, t in enumerate(chosen, start=1):
        audits.append(
            audit_factory(
                t.factory,
                t.members,
                t.nonmembers,
                config=cfg,
                significance=alpha,
                class_id=t.class_id,
                client_id=t.client_id,
            )
        )
        if progress is not None:
            progress(done, len(chosen))
    return FactoryAuditReport(
        config=cfg,
        factories=tuple(audits),
        skipped=tuple(skipped),
        per_test_significance=alpha,
        seconds=time.perf_counter() - start,
    )
