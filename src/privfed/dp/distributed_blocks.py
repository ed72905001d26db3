"""Distributed DP for vectors whose coordinates carry different noise scales (pure numpy).

:mod:`privfed.dp.distributed` accounts one noise parameter for every
coordinate.  A real payload mixes blocks of very different scales (the latent
engine's sums live on the grid ``2**-f``, its second moments on ``2**-2f``),
and the best split of the budget gives each block its own noise.  This module
is the accounting, calibration and dropout-resilient layering of such
*block* noise.

Notation (grid units throughout)
--------------------------------

Block ``b`` has ``d_b`` coordinates; each of the ``n`` honest contributors
adds to each of them an independent draw of per-client *variance parameter*
``v_b`` (``σ_b²`` for the discrete Gaussian ``N_Z(0, σ_b²)``, ``2λ_b`` for the
Skellam ``Poisson(λ_b) − Poisson(λ_b)``).  The sensitivity enters through one
number, the *unit μ²*::

    M = sup over neighbouring datasets of Σ_b ‖Δ_b‖₂² / v_b,

the whitened squared change for ONE client's noise (the caller computes it
from the exact per-record bounds, e.g. the joint replace-one bound of
:func:`privfed.dp.sensitivity.joint_mu_squared`).  Every Δ is an integer
vector (exact fixed-point totals).

Accounting (proofs)
-------------------

Coordinates carry independent noise, so for a fixed neighbouring pair the
output is a product distribution and Rényi divergences add over coordinates.

* Distributed discrete Gaussian.  Kairouz, Liu & Steinke (2021,
  arXiv:2102.06387, Thm 1) applied to ONE coordinate (d = 1) gives
  ``D_α <= α Δ_j²/(2nσ_j²) + τ(n, σ_j)``.  Summing:
  ``ε(α) <= α M/(2n) + Σ_b d_b τ(n, σ_b)``.  More honest noise is
  post-processing, so the bound at every ``n' <= n`` also holds; the curve is
  the minimum over ``n'`` (exhaustive for ``n' <= 2**12``, plus ``n' = n``;
  the minimum over any subset of valid bounds is valid).
* Distributed Skellam, per-block shares.  Block b's honest noise is
  ``Skellam`` of total variance ``μ_b = n v_b`` per coordinate.  Agarwal,
  Kairouz & Liu (2021, Thm 3.5), applied to block b alone (a ``d_b``-dimensional
  Skellam mechanism) at integer α, bounds its divergence by
  ``αW_b/2 + min(((2α−1)‖Δ_b‖₂² + 6‖Δ_b‖₁)/(4μ_b²), 3‖Δ_b‖₁/(2μ_b))`` with
  ``W_b = ‖Δ_b‖₂²/μ_b`` (the block's whitened share).  The blocks' noise is
  independent, so for a fixed neighbouring pair the divergences add over the
  blocks (composition of independent mechanisms on one input).  Integers give
  ``‖Δ_b‖₁ <= ‖Δ_b‖₂²``, hence per block ``W_b·(α/2 + c_b(α))`` with
  ``c_b(α) = min((2α + 5)/(4μ_b), 3/2)``.  What is known of the shares: ``Σ_b
  W_b <= S = M/n`` and, where the caller states them, ``W_b <= M_b/n`` with
  ``M_b = sup ‖Δ_b‖₂²/v_b`` (``block_mu_squared``, e.g. ``1/v`` for a count
  moved by one record).  So ``ε(α) <= αS/2 + max Σ_b W_b c_b(α)`` over that
  box-and-simplex, a fractional knapsack: the greedy fill in increasing ``μ_b``
  (``c_b`` decreases in ``μ_b`` at every α, so one fill is optimal for every
  order) is the maximum.  Without caps the fill puts all of S on the smallest
  ``μ_b``, the bound before per-block shares (``S/μ_min``); with caps each
  block pays its own second-order term only.  With ``E = Σ_b W_b/μ_b`` of the
  fill (first option of the min): ``ε(α) <= αρ + c`` with ``ρ = (S + E)/2``,
  ``c = 5E/4``; D_α is non-decreasing in α, so at every real order
  ``ε(α) <= ρα + ξ`` with ``ξ = ρ + c`` (the zCDP line that is exported).  The
  accounted curve is tighter: the integer-order bound (with the min),
  interpolated between integers by the convexity of ``(α−1)·D_α`` in α, and
  ``ε(2)`` on (1, 2).  With a single block this reproduces the Δ₁ = Δ₂² case
  of :func:`privfed.dp.distributed.skellam_zcdp`.

Both are exported to dp-accounting as ``ZCDpEvent(rho, xi)``.

Dropout-resilient layers (Dordis, Jiang et al., EuroSys 2024, arXiv:2209.12528)
-------------------------------------------------------------------------------

Independent noise calibrated for ``n_min = t − n_C`` honest contributors
over-noises when ``u > t`` clients survive: the delivered variance is
``u/n_min`` times what the claim needs (:func:`dropout_inflation`).  With
layers, each client's noise is layer 0 plus layers ``1..L`` (``L = n − t``),
layer ``j`` drawn from its own 32-byte seed, which is Shamir-shared like the
self-mask seed.  Per-client layer variances for a target honest total ``V``
(:func:`layer_variances`)::

    layer 0:  V/(n − n_C),     layer j:  V·(1/(n − j − n_C) − 1/(n − j + 1 − n_C)).

After the survivor set (``u`` clients) is fixed, the server learns the seeds of
layers ``j > n − u`` of every survivor, re-derives them and subtracts them
(:func:`excess_layer_noise`).  Each survivor then keeps layers ``0..n − u``,
whose variances telescope to ``V/(u − n_C)``; at least ``u − n_C`` survivors
are honest, so the honest kept variance is at least ``V`` for every
``t <= u <= n``.  This is claimed for the Skellam mechanism only: sums of
independent Skellams are Skellam, so the honest kept noise of block b is
exactly ``Skellam`` of total variance ``>= V_b`` and the accounting of
``n_min`` contributors of ``λ_b = V_b/(2 n_min)`` applies unchanged.  A sum of
discrete Gaussians of *different* σ is not covered by the bound above, so the
discrete Gaussian is offered without layers (:func:`check_layered_mechanism`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from privfed._checks import (
    check_bytes,
    check_choice,
    check_count,
    check_delta,
    check_finite_nonnegative,
    check_finite_positive,
    check_instance,
    check_int,
)
from privfed._records import set_fields
from privfed.dp.distributed import (
    DDG_MIN_NOISE_STD,
    MAX_CONTRIBUTORS,
    WRAP_PROBABILITY_LIMIT,
    DistributedMechanism,
    _check_wrap_limit,
    _min_over_contributors,
    _refuse_wrap,
    _round_up,
    _tau_increments,
    calibrate_noise_parameter,
    log_wrap_probability,
)
from privfed.dp.rdp import RDP_ORDERS, check_orders, rdp_epsilon
from privfed.dp.samplers import (
    MAX_EXACT_DISCRETE_GAUSSIAN_SCALE,
    MAX_POISSON_MEAN,
    MIN_POISSON_MEAN,
    exact_discrete_gaussian,
    skellam_noise,
)
from privfed.errors import CalibrationError, ParameterError, ParameterTypeError

__all__ = [
    "LAYER_SEED_BYTES",
    "BlockNoise",
    "RingBlocks",
    "block_rdp",
    "block_zcdp",
    "calibrate_block_noise",
    "check_layered_mechanism",
    "check_ring_blocks",
    "dropout_inflation",
    "excess_layer_noise",
    "layer_poisson_means",
    "layer_variances",
    "layered_noise",
    "noise_variance",
    "ring_log_wrap_bound",
    "ring_wrap_bound",
    "sample_block_noise",
]

#: Bytes of one layer seed (what the secure-aggregation clients Shamir-share).
LAYER_SEED_BYTES: Final = 32
_MECHANISMS: Final = ("discrete-gaussian", "skellam")
_SAFE: Final = 1.0 + 1e-12
_ABOVE: Final = 1.0 + 2.0**-50  # keeps the exported line above the curve's rounding
_LAYER_DOMAIN: Final = b"privfed.dp.distributed_blocks/layer/v1/"


def _mechanism(value: object) -> DistributedMechanism:
    return check_choice("mechanism", value, _MECHANISMS)


def _clients(value: object, name: str = "num_clients") -> int:
    return check_int(name, value, minimum=1, maximum=MAX_CONTRIBUTORS, numpy=True)


def _blocks(noise: object, dimensions: object) -> tuple[tuple[float, ...], tuple[int, ...]]:
    if not isinstance(noise, Sequence) or isinstance(noise, str | bytes):
        raise ParameterTypeError("noise", "a sequence of floats (one per block)", noise)
    if not isinstance(dimensions, Sequence) or isinstance(dimensions, str | bytes):
        raise ParameterTypeError("dimensions", "a sequence of ints (one per block)", dimensions)
    if len(noise) == 0 or len(noise) != len(dimensions):
        raise ParameterError(
            "noise", f"a non-empty sequence of {len(dimensions)} values (one per block)", noise
        )
    values = tuple(check_finite_positive("noise", v) for v in noise)
    dims = tuple(check_count("dimensions", d, minimum=1) for d in dimensions)
    return values, dims


def noise_variance(mechanism: DistributedMechanism, noise: float) -> float:
    """The variance parameter ``v`` of one draw: ``σ²`` (discrete Gaussian) or ``2λ`` (Skellam).

    For the discrete Gaussian ``v = σ²`` is the parameter of ``N_Z(0, σ²)``
    (its variance is at most ``σ²``); the accounting uses the parameter.
    """
    kind = _mechanism(mechanism)
    value = check_finite_positive("noise", noise)
    return value * value if kind == "discrete-gaussian" else 2.0 * value


def _caps(value: object, blocks: int) -> tuple[float, ...] | None:
    """``block_mu_squared``: ``None`` or one finite M_b >= 0 per block."""
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise ParameterTypeError(
            "block_mu_squared", "None or a sequence of floats (one per block)", value
        )
    if len(value) != blocks:
        raise ParameterError("block_mu_squared", f"{blocks} values (one per block)", len(value))
    return tuple(check_finite_nonnegative("block_mu_squared", v) for v in value)


def _block_bound_args(
    mechanism: object,
    num_clients: object,
    noise: object,
    dimensions: object,
    unit_mu_squared: object,
    block_mu_squared: object,
) -> tuple[
    DistributedMechanism, int, tuple[float, ...], tuple[int, ...], float, tuple[float, ...] | None
]:
    """The checked arguments of :func:`block_zcdp` and :func:`block_rdp`, in their order."""
    kind = _mechanism(mechanism)
    n = _clients(num_clients)
    values, dims = _blocks(noise, dimensions)
    big_m = check_finite_nonnegative("unit_mu_squared", unit_mu_squared)
    return kind, n, values, dims, big_m, _caps(block_mu_squared, len(values))


def _skellam_fill(
    values: tuple[float, ...], big_m: float, caps: tuple[float, ...] | None, n: int
) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(S, W, μ)``: the greedy knapsack fill of the whitened shares (module notes).

    ``W_b`` is filled in increasing ``μ_b = 2nλ_b`` up to ``M_b/n`` (no cap
    without ``caps``) until ``Σ W_b = S = M/n``.
    """
    s = big_m / n
    mu = np.asarray([n * 2.0 * v for v in values], dtype=np.float64)
    share = np.zeros(len(values), dtype=np.float64)
    left = s
    for b in np.argsort(mu, kind="stable"):
        take = left if caps is None else min(caps[b] / n, left)
        share[b] = take
        left -= take
        if left <= 0.0:
            break
    return s, share, mu


def block_zcdp(
    mechanism: DistributedMechanism,
    *,
    num_clients: int,
    noise: Sequence[float],
    dimensions: Sequence[int],
    unit_mu_squared: float,
    block_mu_squared: Sequence[float] | None = None,
) -> tuple[float, float]:
    """The ``(ρ, ξ)`` zCDP line of block noise from ``num_clients`` honest contributors.

    See the module notes for the proofs.

    Args:
        mechanism: ``"discrete-gaussian"`` (``noise`` = σ_b, each >= 0.5) or
            ``"skellam"`` (``noise`` = λ_b).
        num_clients: n, honest contributors, in ``[1, 2**20]``.
        noise: Per-client noise parameter of each block (grid units).
        dimensions: Coordinates of each block.
        unit_mu_squared: M (see the module notes), finite, >= 0.
        block_mu_squared: ``None`` (default: no per-block bound) or one
            ``M_b = sup ‖Δ_b‖²/v_b`` per block (finite, >= 0): each Skellam
            block then pays only its own second-order term (module notes).
            Ignored by the discrete Gaussian, whose bound has no such term.

    Returns:
        ``(rho, xi)`` rounded up by a relative 1e-12; ``(0, 0)`` when M = 0.
    """
    kind, n, values, dims, big_m, caps = _block_bound_args(
        mechanism, num_clients, noise, dimensions, unit_mu_squared, block_mu_squared
    )
    if kind == "discrete-gaussian":
        _check_ddg(values)
    if big_m == 0.0:
        return 0.0, 0.0
    if kind == "discrete-gaussian":
        xi = sum(
            d * float(np.sum(_tau_increments(n, s))) for s, d in zip(values, dims, strict=True)
        )
        inc = np.zeros(max(n - 1, 0), dtype=np.float64)
        for s, d in zip(values, dims, strict=True):
            inc += d * _tau_increments(n, s)
        if inc.size:  # the curve's own offset at n' = n (sequential sum): stay above it
            xi = max(xi, float(np.cumsum(inc)[-1]))
        return big_m / (2.0 * n) * _SAFE * _ABOVE, xi * _SAFE * _ABOVE
    if caps is None:  # the fill puts all of S on the smallest μ_b: E = S/μ_min
        s = big_m / n
        mu_min = n * 2.0 * min(values)
        rho = 0.5 * s * (1.0 + 1.0 / mu_min)
        xi = rho + 5.0 * s / (4.0 * mu_min)
        return rho * _SAFE, xi * _SAFE
    s, share, mu = _skellam_fill(values, big_m, caps, n)
    e = float(np.sum(share / mu))
    rho = 0.5 * (s + e)
    xi = rho + 1.25 * e
    return rho * _SAFE, xi * _SAFE


def _check_ddg(values: tuple[float, ...]) -> None:
    for s in values:
        if s < DDG_MIN_NOISE_STD:
            raise ParameterError(
                "noise", f"discrete-Gaussian sigmas >= {DDG_MIN_NOISE_STD} (grid units)", s
            )


def block_rdp(
    mechanism: DistributedMechanism,
    orders: Sequence[float],
    *,
    num_clients: int,
    noise: Sequence[float],
    dimensions: Sequence[int],
    unit_mu_squared: float,
    block_mu_squared: Sequence[float] | None = None,
) -> npt.NDArray[np.float64]:
    """The RDP curve of block noise at ``orders`` (never increasing in ``num_clients``).

    Skellam: the integer-order bound interpolated by convexity (module notes),
    below the line of :func:`block_zcdp`.  Discrete Gaussian: the minimum over
    ``n' <= n`` of ``α M/(2n') + Σ_b d_b τ(n', σ_b)`` (exhaustive up to
    ``n' = 2**12``, and ``n' = n``), which is below the line of
    :func:`block_zcdp` at n.

    Args: As :func:`block_zcdp`, plus ``orders`` (finite floats > 1).

    Returns:
        float64 array of ε(α), rounded up.
    """
    alpha = check_orders(orders)
    kind, n, values, dims, big_m, caps = _block_bound_args(
        mechanism, num_clients, noise, dimensions, unit_mu_squared, block_mu_squared
    )
    if kind == "skellam":
        if big_m == 0.0:
            return np.zeros_like(alpha)
        s, share, mu = _skellam_fill(values, big_m, caps, n)
        used = share > 0.0
        mu_min = float(np.min(mu))

        def at_integer(a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            # αS/2 + Σ_b W_b·min((2α + 5)/(4μ_b), 3/2) (module notes)
            if caps is None:  # all of S on the smallest μ_b (the expression before caps)
                second = np.minimum((2.0 * a + 5.0) * s / (4.0 * mu_min), 1.5 * s)
            else:
                c = np.minimum((2.0 * a[:, None] + 5.0) / (4.0 * mu[None, used]), 1.5)
                second = c @ share[used]
            return np.asarray(a * s / 2.0 + second)

        # Between integer orders: (α−1)·D_α is convex in α (a log-moment-generating
        # function), so the chord of (α−1)ε(α) bounds it; on (1, 2): ε(2) (D_α is
        # non-decreasing in α).
        low = np.maximum(np.floor(alpha), 2.0)
        high = np.maximum(np.ceil(alpha), 2.0)
        t = np.where(high > low, alpha - low, 0.0)
        chord = (1.0 - t) * (low - 1.0) * at_integer(low) + t * (high - 1.0) * at_integer(high)
        curve = np.where(alpha < 2.0, at_integer(high), chord / (alpha - 1.0))
        return np.asarray(curve * _SAFE, dtype=np.float64)
    _check_ddg(values)
    if big_m == 0.0:
        return np.zeros_like(alpha)
    inc = np.zeros(max(n - 1, 0), dtype=np.float64)
    for s, d in zip(values, dims, strict=True):
        inc += d * _tau_increments(n, s)
    tau_d = np.concatenate([np.zeros(1), np.cumsum(inc)])  # Σ_b d_b τ_b(n'), n' = 1..n
    # g(n') = αM/(2n') + tau_d(n') is a valid bound at every n' <= n; the curve is its
    # minimum over n' (exact up to n' = 2**12, and at n' = n; see _min_over_contributors).
    curve = _min_over_contributors(alpha, 0.5 * big_m, tau_d)
    return np.asarray(curve * _SAFE, dtype=np.float64)


# =========================================================================================
# Calibration
# =========================================================================================


@dataclass(frozen=True)
class BlockNoise:
    """Calibrated block noise: per-client parameters for ``num_contributors`` honest clients.

    Attributes:
        mechanism: ``"discrete-gaussian"`` or ``"skellam"``.
        num_contributors: n_min, the honest contributors the claim rests on.
        noise: Per-client σ_b or λ_b of each block (rounded up to 17 bits).
        dimensions: Coordinates per block.
        unit_mu_squared: M of ``noise`` (an upper bound: computed from the
            un-rounded parameters, which are at most the rounded ones).
        total_variances: ``V_b = n_min · v_b``: the honest noise variance (parameter)
            per coordinate of block b that every accepted total carries.
        scale: κ, ``V_b = κ · base_variance_b``.
        epsilon: The target ε; the noise meets it at ``delta``.
        delta: The target δ.
        block_mu_squared: Per-block ``M_b`` (same units as M) or ``None``:
            what the Skellam accounting caps each block's share with.
    """

    mechanism: DistributedMechanism
    num_contributors: int
    noise: tuple[float, ...]
    dimensions: tuple[int, ...]
    unit_mu_squared: float
    total_variances: tuple[float, ...]
    scale: float
    epsilon: float
    delta: float
    block_mu_squared: tuple[float, ...] | None = None

    def rdp(self, orders: Sequence[float] = RDP_ORDERS) -> npt.NDArray[np.float64]:
        """:func:`block_rdp` of this noise."""
        return block_rdp(
            self.mechanism,
            orders,
            num_clients=self.num_contributors,
            noise=self.noise,
            dimensions=self.dimensions,
            unit_mu_squared=self.unit_mu_squared,
            block_mu_squared=self.block_mu_squared,
        )


def _per_client(kind: str, total_variance: float, n: int) -> float:
    v = total_variance / n
    return math.sqrt(v) if kind == "discrete-gaussian" else 0.5 * v


def calibrate_block_noise(
    mechanism: DistributedMechanism,
    epsilon: float,
    delta: float,
    *,
    num_contributors: int,
    base_variances: Sequence[float],
    dimensions: Sequence[int],
    base_mu_squared: float,
    base_block_mu_squared: Sequence[float] | None = None,
) -> BlockNoise:
    """The smallest common scale κ of block variances that meets (ε, δ).

    The honest total variance of block b is ``V_b = κ · base_variances[b]``
    (the shape of the split, e.g. the central plan's noise variances in grid
    units), and ``base_mu_squared = sup Σ_b ‖Δ_b‖²/base_variances[b]`` (e.g. the
    central plan's μ²).  Each of the ``n`` contributors then adds
    ``σ_b = sqrt(V_b/n)`` or ``λ_b = V_b/(2n)``, so ``M = n·base_mu²/κ``.  κ is
    bisected on the :func:`block_rdp` curve converted with
    :func:`privfed.dp.rdp.rdp_epsilon`, the parameters rounded *up*,
    and the result re-checked (our ε and dp-accounting's ``compute_delta``).

    Args:
        mechanism: ``"discrete-gaussian"`` or ``"skellam"``.
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1).
        num_contributors: n_min (see :func:`privfed.dp.min_honest_contributors`).
        base_variances: Positive finite shape per block.
        dimensions: Coordinates per block.
        base_mu_squared: Positive finite μ² of the shape.
        base_block_mu_squared: ``None`` or, per block, ``sup ‖Δ_b‖²/base_variances[b]``
            (finite, >= 0; then ``M_b = n·base_b/κ``): each Skellam block pays
            only its own second-order term (see :func:`block_zcdp`).

    Returns:
        The :class:`BlockNoise`.

    Raises:
        ParameterError: A value outside its domain.
        CalibrationError: No scale up to 2**200 meets the target.
    """
    kind = _mechanism(mechanism)
    eps = check_finite_positive("epsilon", epsilon)
    dlt = check_delta(delta)
    n = _clients(num_contributors, "num_contributors")
    base, dims = _blocks(base_variances, dimensions)
    mu2 = check_finite_positive("base_mu_squared", base_mu_squared)
    base_caps = _caps(base_block_mu_squared, len(base))

    def params(kappa: float) -> tuple[tuple[float, ...], float, tuple[float, ...] | None]:
        noise = tuple(_round_up(_per_client(kind, kappa * b, n)) for b in base)
        if kind == "discrete-gaussian":
            noise = tuple(max(s, DDG_MIN_NOISE_STD) for s in noise)
        caps = None if base_caps is None else tuple(n * m / kappa for m in base_caps)
        return noise, n * mu2 / kappa, caps

    def curve_of(kappa: float) -> npt.NDArray[np.float64]:
        noise, big_m, caps = params(kappa)
        return block_rdp(
            kind,
            RDP_ORDERS,
            num_clients=n,
            noise=noise,
            dimensions=dims,
            unit_mu_squared=big_m,
            block_mu_squared=caps,
        )

    # Guess: the Gaussian's κ with μ² = 2 log(1.25/δ) ... (any positive start works).
    guess = mu2 * 2.0 * math.log(1.25 / dlt) / (eps * eps)
    kappa = calibrate_noise_parameter(curve_of, eps, dlt, 2.0**-200, 2.0**200, guess, "noise scale")
    noise, big_m, caps = params(kappa)
    if rdp_epsilon(curve_of(kappa), dlt) > eps:  # pragma: no cover - the calibration certified it
        raise CalibrationError("could not certify the calibrated block noise")
    return BlockNoise(
        mechanism=kind,
        num_contributors=n,
        noise=noise,
        dimensions=dims,
        unit_mu_squared=big_m,
        total_variances=tuple(kappa * b for b in base),
        scale=kappa,
        epsilon=eps,
        delta=dlt,
        block_mu_squared=caps,
    )


# =========================================================================================
# Dropouts: inflation and layers
# =========================================================================================


def dropout_inflation(num_survivors: int, threshold: int, corrupted: int = 0) -> float:
    """Std inflation of independent per-client noise when ``num_survivors`` clients survive.

    Noise calibrated for ``n_min = t − n_C`` contributors, added by all ``u``
    survivors, has ``u/n_min`` times the variance the claim needs; this
    returns ``sqrt(u/n_min)`` (e.g. 20 clients, t = 11, 19 survivors:
    ``sqrt(19/11) ≈ 1.31``).

    Raises:
        ParameterError: ``u < t`` or ``t − n_C < 1``.
    """
    t = check_int("threshold", threshold, minimum=1, numpy=True)
    c = check_int("corrupted", corrupted, minimum=0, maximum=t - 1, numpy=True)
    u = check_int("num_survivors", num_survivors, minimum=t, numpy=True)
    return math.sqrt(u / (t - c))


def check_layered_mechanism(mechanism: object) -> DistributedMechanism:
    """``"skellam"``; the discrete Gaussian is refused for layered noise (module notes).

    Raises:
        ParameterError: Any other mechanism.
    """
    kind = _mechanism(mechanism)
    if kind != "skellam":
        raise ParameterError(
            "mechanism",
            "'skellam' for dropout-resilient noise layers",
            kind,
            detail="a sum of discrete Gaussians of different sigma is not covered by the "
            "distributed discrete-Gaussian bound",
        )
    return kind


def _check_layers(num_clients: object, corrupted: object, layers: object) -> tuple[int, int, int]:
    n = _clients(num_clients)
    c = check_int("corrupted", corrupted, minimum=0, maximum=n - 1, numpy=True)
    top = n - c - 1
    big_l = check_int("layers", layers, minimum=0, maximum=top, numpy=True)
    return n, c, big_l


def layer_variances(
    total_variance: float, *, num_clients: int, corrupted: int, layers: int
) -> tuple[float, ...]:
    """Per-client variances of layers ``0..L`` for an honest target ``V`` (module notes).

    Layer 0: ``V/(n − n_C)``; layer j: ``V·(1/(n − j − n_C) − 1/(n − j + 1 − n_C))``.
    Keeping layers ``0..n − u`` leaves ``V/(u − n_C)`` per survivor.

    Args:
        total_variance: V > 0 (grid units²).
        num_clients: n, clients of the round.
        corrupted: n_C, in ``[0, n − 1]``.
        layers: L, in ``[0, n − n_C − 1]`` (the secure-aggregation config
            uses ``L = n − t``; then ``n − L − n_C = t − n_C >= 1``).

    Returns:
        ``L + 1`` variances (all > 0).
    """
    v = check_finite_positive("total_variance", total_variance)
    n, c, big_l = _check_layers(num_clients, corrupted, layers)
    h = n - c
    out = [v / h]
    out.extend(v * (1.0 / (h - j) - 1.0 / (h - j + 1)) for j in range(1, big_l + 1))
    return tuple(out)


def layer_poisson_means(
    total_variance: float, *, num_clients: int, corrupted: int, layers: int
) -> tuple[float, ...]:
    """Skellam λ of each layer (half of :func:`layer_variances`), rounded up to 17 bits.

    Guaranteed exactly (checked in rational arithmetic, a layer's λ raised where
    floating-point rounding left a prefix short): for every survivor count
    ``u = n − k`` with ``0 <= k <= L``, the ``u − n_C`` honest survivors' kept
    layers ``0..k`` have total Poisson mean ``(u − n_C)·Σ_{j<=k} λ_j >= V/2``.
    A release accounted as ``n_min`` contributors of ``λ`` must pass
    ``total_variance = 2·n_min·λ`` so the kept noise is never below that.

    Raises:
        ParameterError: A λ outside the exact sampler's domain ``[2**-30, 2**30]``.
    """
    v = check_finite_positive("total_variance", total_variance)
    n, c, _ = _check_layers(num_clients, corrupted, layers)
    out = [
        _round_up(0.5 * x)
        for x in layer_variances(v, num_clients=num_clients, corrupted=corrupted, layers=layers)
    ]
    need = Fraction(v) / 2
    kept = Fraction(0)
    for k in range(len(out)):
        kept += Fraction(out[k])
        while (n - c - k) * kept < need:  # never in practice: the rounding up covers it
            bumped = _round_up(math.nextafter(out[k] * (1.0 + 2.0**-16), math.inf))
            kept += Fraction(bumped) - Fraction(out[k])
            out[k] = bumped
    for lam in out:
        if not MIN_POISSON_MEAN <= lam <= MAX_POISSON_MEAN:
            raise ParameterError(
                "total_variance",
                "a variance whose layers have Poisson means in [2**-30, 2**30]",
                total_variance,
                detail="use a coarser or finer grid",
            )
    return tuple(out)


def _layer_seed(seed: bytes, block: int) -> bytes:
    return hashlib.sha256(_LAYER_DOMAIN + block.to_bytes(4, "big") + seed).digest()


def sample_block_noise(
    mechanism: DistributedMechanism,
    noise: Sequence[float],
    dimensions: Sequence[int],
    *,
    seed: int | bytes | None = None,
) -> npt.NDArray[np.int64]:
    """One client's independent block noise: the blocks' draws concatenated (int64).

    Args:
        mechanism: ``"discrete-gaussian"`` (exact ``N_Z(0, σ_b²)``) or ``"skellam"``.
        noise: Per-client σ_b or λ_b.
        dimensions: Coordinates per block.
        seed: ``None`` (default): OS CSPRNG; an int or bytes for reproducible
            experiments (record ``seeded=True``).

    Raises:
        ParameterError: A parameter outside the exact sampler's domain.
    """
    kind = _mechanism(mechanism)
    values, dims = _blocks(noise, dimensions)
    parts = []
    for b, (value, d) in enumerate(zip(values, dims, strict=True)):
        sub: bytes | None
        if seed is None:
            sub = None
        else:
            raw = seed if isinstance(seed, bytes) else _int_bytes(seed)
            sub = _layer_seed(b"independent/" + raw, b)
        if kind == "discrete-gaussian":
            if value > MAX_EXACT_DISCRETE_GAUSSIAN_SCALE:
                raise ParameterError("noise", "discrete-Gaussian sigmas <= 2**15 grid units", value)
            parts.append(exact_discrete_gaussian(d, value, seed=sub))
        else:
            parts.append(skellam_noise(d, value, seed=sub))
    return np.concatenate(parts).astype(np.int64, copy=False)


def _int_bytes(seed: int) -> bytes:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ParameterTypeError("seed", "an int >= 0, bytes or None", seed)
    return seed.to_bytes((seed.bit_length() + 8) // 8, "big")


def layered_noise(
    layer_means: Sequence[float],
    dimensions: Sequence[int],
    seed: bytes,
) -> npt.NDArray[np.int64]:
    """The Skellam noise of ONE layer for all blocks, derived from its seed (deterministic).

    Both the client (when it adds the layer) and the server (when it removes a
    revealed layer) call this with the same seed and get the same draws.

    Args:
        layer_means: ``layer_means[b]`` is the λ of this layer in block b.
        dimensions: Coordinates per block.
        seed: The layer's 32-byte seed.

    Returns:
        int64 vector of ``Σ_b d_b`` values.
    """
    key = check_bytes("seed", seed, size=LAYER_SEED_BYTES)
    values, dims = _blocks(layer_means, dimensions)
    parts = [
        skellam_noise(d, lam, seed=_layer_seed(key, b))
        for b, (lam, d) in enumerate(zip(values, dims, strict=True))
    ]
    return np.concatenate(parts).astype(np.int64, copy=False)


def excess_layer_noise(
    revealed: Mapping[int, Mapping[int, bytes]],
    layer_means: Sequence[Sequence[float]],
    dimensions: Sequence[int],
    *,
    num_clients: int,
    survivors: Sequence[int],
) -> npt.NDArray[np.uint64]:
    """The ring vector (``Z_{2**64}``) of the revealed excess layers, to subtract from the total.

    Checks that the server got exactly the layers the reveal rule releases:
    for each survivor v the layers ``j`` with ``n − u < j <= L``, no other
    client, no other layer.

    Args:
        revealed: survivor id -> {layer j -> 32-byte seed}
            (``SecAggServer.revealed_noise_seeds``).
        layer_means: ``layer_means[b][j]``: λ of layer j (0..L) in block b.
        dimensions: Coordinates per block.
        num_clients: n of the round.
        survivors: Ids of the clients whose input is in the total.

    Returns:
        uint64 vector: the sum mod 2**64 of the revealed layers' noise.

    Raises:
        ParameterError: The revealed layers are not what the rule gives.
    """
    n = _clients(num_clients)
    ids = sorted(int(v) for v in survivors)
    u = len(ids)
    if len(set(ids)) != u:  # a repeated id would inflate u, and with it the layers removed
        raise ParameterError("survivors", "distinct client ids", ids)
    if u > n:
        raise ParameterError("survivors", f"at most num_clients={n} ids", u)
    big_l = len(layer_means[0]) - 1 if layer_means else 0
    if any(len(m) != big_l + 1 for m in layer_means):
        raise ParameterError("layer_means", "the same number of layers in every block", None)
    expected = {j for j in range(1, big_l + 1) if j > n - u}
    if set(revealed) - set(ids):
        raise ParameterError("revealed", "seeds of survivors only", sorted(set(revealed)))
    total_dim = int(sum(dimensions))
    out = np.zeros(total_dim, dtype=np.uint64)
    for v in ids:
        got = dict(revealed.get(v, {}))
        if set(got) != expected:
            raise ParameterError(
                "revealed", f"layers {sorted(expected)} of survivor {v}", sorted(got)
            )
        for j in sorted(expected):
            noise = layered_noise([m[j] for m in layer_means], dimensions, got[j])
            out += noise.astype(np.uint64)
    return out


# =========================================================================================
# The ring
# =========================================================================================


@dataclass(frozen=True)
class RingBlocks:
    """The noisy totals a ring must hold, block by block: what its wrap bound reads.

    Taken as one argument by :func:`ring_log_wrap_bound`, :func:`ring_wrap_bound`
    and :func:`check_ring_blocks`.  Checked here, once.

    Attributes:
        ring_bits: k of ``Z_{2**k}``, an int in [2, 64].
        mechanism: The noise law, ``"discrete-gaussian"`` or ``"skellam"`` (for
            layered Skellam pass the per-client sum of all layers' λ: before the
            excess is removed the ring total holds every layer).
        noise: Per-client σ_b or λ_b, one finite float > 0 per block.
        dimensions: Coordinates per block, one int >= 1 per block.
        total_bounds: Bound B_b >= 0 on every coordinate of the exact total of
            block b, one int per block.
        num_summands: The most clients whose noisy inputs are summed, >= 1.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    ring_bits: int
    mechanism: DistributedMechanism
    noise: Sequence[float]
    dimensions: Sequence[int]
    total_bounds: Sequence[int]
    num_summands: int

    def __post_init__(self) -> None:
        values, dims = _blocks(self.noise, self.dimensions)
        bounds = self.total_bounds
        if (
            not isinstance(bounds, Sequence)
            or isinstance(bounds, str | bytes)
            or len(bounds) != len(dims)
        ):
            raise ParameterError("total_bounds", f"{len(dims)} bounds (one per block)", bounds)
        set_fields(
            self,
            ring_bits=check_int("ring_bits", self.ring_bits, minimum=2, maximum=64, numpy=True),
            mechanism=_mechanism(self.mechanism),
            noise=values,
            dimensions=dims,
            total_bounds=tuple(
                check_int("total_bounds", int(b), minimum=0, numpy=True) for b in bounds
            ),
            num_summands=check_count("num_summands", self.num_summands, minimum=1),
        )


def ring_log_wrap_bound(ring: RingBlocks) -> float:
    """Natural log of the union bound over blocks of the wrap probability (never underflows).

    ``log Σ_b p_b`` of :func:`privfed.dp.distributed.log_wrap_probability`
    (log-sum-exp), rounded up by a relative 1e-12 of the probability and capped at 0.

    Args:
        ring: The ring and its blocks (:class:`RingBlocks`).

    Returns:
        ``log p`` in ``[-inf, 0]`` with p an upper bound on the probability that
        any coordinate wraps.
    """
    r = check_instance("ring", ring, RingBlocks)
    logs = [
        log_wrap_probability(
            ring_bits=r.ring_bits,
            mechanism=r.mechanism,
            noise=value,
            num_summands=r.num_summands,
            total_bound=bound,
            dimension=d,
        )
        for value, d, bound in zip(r.noise, r.dimensions, r.total_bounds, strict=True)
    ]
    top = max(logs)
    if top == -math.inf:
        return top
    total = top + math.log(sum(math.exp(v - top) for v in logs))
    return min(0.0, total + math.log(_SAFE))


def ring_wrap_bound(ring: RingBlocks) -> float:
    """``exp`` of :func:`ring_log_wrap_bound` (underflows to 0.0 below ``exp(-745)``).

    Args: As :func:`ring_log_wrap_bound`.

    Returns:
        An upper bound on the probability that any coordinate wraps.
    """
    return math.exp(ring_log_wrap_bound(ring))


def check_ring_blocks(ring: RingBlocks, *, limit: float = WRAP_PROBABILITY_LIMIT) -> float:
    """:func:`ring_wrap_bound`, refused above ``limit`` (default ``2**-40``).

    Raises:
        ParameterError: ``limit`` is not a float in (0, 1).
        RingOverflowError: The bound exceeds ``limit``.
    """
    cap = _check_wrap_limit(limit)
    p = ring_wrap_bound(ring)
    return _refuse_wrap(ring.ring_bits, p, cap)
