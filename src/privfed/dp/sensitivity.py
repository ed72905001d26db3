"""Adjacency relations and exact L2 sensitivities of per-class clipped sums.

The latent-statistic engine releases, for every class c, the sum of clipped
latents ``m_c = Σ z`` (``d`` values), the second-moment sum ``M_c = Σ z zᵀ``
(``d × d``) and, depending on the adjacency, the count ``n_c``.  Every record
is clipped to L2 norm ``‖z‖₂ ≤ R`` (``clip_norm``) before it enters a sum.

Two adjacency relations are supported, and every function takes one explicitly:

* :attr:`Adjacency.REPLACE_ONE` -- D and D′ differ by replacing one record by
  another *of the same class*; the class counts are public and released
  without noise.  With ``private_labels=True`` a replaced record may change
  class, so two classes change and the counts must be noised too.
* :attr:`Adjacency.ADD_REMOVE` -- D′ is D with one record added or removed;
  counts change by one and must be noised.

Sensitivities (Frobenius norm for matrices):

=================  ===============  ==========
quantity           REPLACE_ONE      ADD_REMOVE
=================  ===============  ==========
``Σ z``            ``2R``           ``R``
``Σ z zᵀ``         ``√2·R²``        ``R²``
``n_c``            ``0``            ``1``
=================  ===============  ==========

The √2·R² is attained at ``z ⟂ z′`` with ``‖z‖ = ‖z′‖ = R``:
``‖zzᵀ − z′z′ᵀ‖_F² = ‖z‖⁴ + ‖z′‖⁴ − 2(z·z′)²``.  The triangle inequality's
``2R²`` is loose.

For the *joint* release the worst cases of the parts cannot coincide, and
:func:`joint_mu_squared` gives the exact μ² of the whole release.
"""

from __future__ import annotations

import enum
import math
import numbers

from privfed._checks import check_bool, check_finite_positive
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "Adjacency",
    "count_sensitivity",
    "joint_mu_squared",
    "second_moment_sensitivity",
    "sum_sensitivity",
]


class Adjacency(enum.Enum):
    """Which datasets count as neighbours for a privacy guarantee.

    Attributes:
        REPLACE_ONE: Replace one record by another of the same class
            (bounded DP; per-class counts are public).
        ADD_REMOVE: Add or remove one record (unbounded DP; counts are noised).
    """

    REPLACE_ONE = "replace-one"
    ADD_REMOVE = "add-remove"


def _check_adjacency(adjacency: object) -> Adjacency:
    if not isinstance(adjacency, Adjacency):
        raise ParameterTypeError("adjacency", "a privfed.dp.Adjacency member", adjacency)
    return adjacency


def sum_sensitivity(clip_norm: float, adjacency: Adjacency) -> float:
    """Return the L2 sensitivity of ``Σ z`` over records clipped to norm ``clip_norm``.

    Args:
        clip_norm: Clipping radius R (L2 norm, query units); finite, > 0.
        adjacency: The neighbouring relation.

    Returns:
        ``2R`` under REPLACE_ONE (attained at ``z′ = −z``, ``‖z‖ = R``) and ``R``
        under ADD_REMOVE (attained at ``‖z‖ = R``).  Both are tight.
    """
    radius = check_finite_positive("clip_norm", clip_norm)
    adj = _check_adjacency(adjacency)
    return 2.0 * radius if adj is Adjacency.REPLACE_ONE else radius


def second_moment_sensitivity(clip_norm: float, adjacency: Adjacency) -> float:
    """Return the Frobenius (L2) sensitivity of ``Σ z zᵀ`` for records with ``‖z‖ ≤ R``.

    Args:
        clip_norm: Clipping radius R; finite, > 0.
        adjacency: The neighbouring relation.

    Returns:
        ``√2·R²`` under REPLACE_ONE (tight at ``z ⟂ z′``, ``‖z‖ = ‖z′‖ = R``;
        needs ``d >= 2`` to be attained, and is an upper bound for ``d = 1``)
        and ``R²`` under ADD_REMOVE (tight).  The matrix is treated as a vector
        in ``R^{d²}``; releasing only its upper triangle with noise on that
        triangle has a different sensitivity and is not what this returns.
    """
    radius = check_finite_positive("clip_norm", clip_norm)
    adj = _check_adjacency(adjacency)
    r2 = radius * radius
    return math.sqrt(2.0) * r2 if adj is Adjacency.REPLACE_ONE else r2


def count_sensitivity(adjacency: Adjacency, *, private_labels: bool = False) -> float:
    """Return the L2 sensitivity of the vector of per-class counts.

    Args:
        adjacency: The neighbouring relation.
        private_labels: Under REPLACE_ONE, whether a replaced record may change
            class (then two counts move by −1 and +1).  Ignored under ADD_REMOVE.

    Returns:
        ``0`` under REPLACE_ONE with public labels, ``√2`` under REPLACE_ONE with
        private labels, ``1`` under ADD_REMOVE.  All tight.
    """
    adj = _check_adjacency(adjacency)
    check_bool("private_labels", private_labels)
    if adj is Adjacency.ADD_REMOVE:
        return 1.0
    return math.sqrt(2.0) if private_labels else 0.0


def _precision(name: str, noise_std: float | None, radius: float, power: int) -> float:
    """``(R^power/σ)²``, with ``None`` meaning 'not released' (0) and σ = ∞ allowed.

    The ratio is formed factor by factor (``(R/σ)·R`` for power 2), never as
    ``R⁴`` times ``1/σ²``: for large or small R those intermediates overflow or
    underflow and a whole block of the release would silently drop out of μ.
    """
    if noise_std is None:
        return 0.0
    if isinstance(noise_std, bool) or not isinstance(noise_std, numbers.Real):
        raise ParameterTypeError(name, "a float > 0, math.inf or None", noise_std)
    value = float(noise_std)
    if math.isnan(value) or value <= 0.0:
        raise ParameterError(name, "a float > 0, math.inf or None", noise_std)
    if math.isinf(value):
        return 0.0
    ratio = radius / value
    for _ in range(power - 1):
        ratio *= radius
    return ratio * ratio


def _same_class_replace(x: float, y: float) -> float:
    """Exact max over ‖z‖,‖z′‖ ≤ R of a²‖z − z′‖² + b²‖zzᵀ − z′z′ᵀ‖_F² (d >= 2).

    Written in the normalised precisions ``x = a²R²`` and ``y = b²R⁴``.  With
    u = z·z′ the objective is a²(‖z‖² + ‖z′‖²) + b²(‖z‖⁴ + ‖z′‖⁴) − 2a²u − 2b²u²,
    increasing in the norms at fixed u, and concave in u with its peak at
    u* = −a²/(2b²); u ranges over [−‖z‖‖z′‖, ‖z‖‖z′‖].  Hence ‖z‖ = ‖z′‖ = R and
    u = max(u*, −R²), giving ``2x + 2y + x²/(2y)`` when ``x <= 2y`` (that is
    a² <= 2b²R²) and ``4x`` otherwise.
    """
    if y == 0.0:
        return 4.0 * x
    if x <= 2.0 * y:
        return 2.0 * x + 2.0 * y + x * (x / (2.0 * y))
    return 4.0 * x


def joint_mu_squared(
    clip_norm: float,
    noise_std_sum: float | None,
    noise_std_second_moment: float | None,
    adjacency: Adjacency,
    *,
    noise_std_count: float | None = None,
    private_labels: bool = False,
) -> float:
    """Return the exact worst-case μ² of the joint per-class release.

    The release is ``(Σ z + N(0, σ_s² I_d),  Σ z zᵀ + N(0, σ_m² I_{d²}),
    n + N(0, σ_c²))`` for every class, where the second-moment noise is
    isotropic on the ``d × d`` matrix viewed as a vector of ``d²`` entries.  A
    release whose noise is scaled coordinate-block-wise is a Gaussian mechanism
    after whitening, so it is exactly μ-GDP with ``μ²`` the largest squared
    L2 norm of the whitened change between adjacent datasets.  With
    ``a = 1/σ_s``, ``b = 1/σ_m``, ``c = 1/σ_c``:

    * REPLACE_ONE, same class: ``2a²R² + 2b²R⁴ + a⁴/(2b²)`` if ``a² <= 2b²R²``,
      else ``4a²R²`` (derivation in the source; attained for ``d >= 2``; an
      upper bound for ``d = 1``).  It is below the sum of the separate worst
      cases ``4a²R² + 2b²R⁴`` because they occur at different angles.
    * REPLACE_ONE, ``private_labels=True``: the maximum of the same-class value
      and the cross-class value ``2a²R² + 2b²R⁴ + 2c²`` (one class loses z,
      another gains z′; two counts move by one).
    * ADD_REMOVE: ``a²R² + b²R⁴ + c²`` (attained at ``‖z‖ = R``).

    Disjoint classes compose in parallel, so this is also the μ² of the
    release of all classes (under private labels the cross-class case already
    covers the two classes involved).

    Args:
        clip_norm: Clipping radius R; finite, > 0.
        noise_std_sum: σ_s, noise std on each coordinate of ``Σ z``; > 0,
            ``math.inf`` or ``None`` (sum not released).
        noise_std_second_moment: σ_m on each of the ``d²`` entries of
            ``Σ z zᵀ``; > 0, ``math.inf`` or ``None`` (not released).
        adjacency: The neighbouring relation.
        noise_std_count: σ_c on each class count; > 0, ``math.inf`` or
            ``None`` (counts not released with noise).  Under ADD_REMOVE, and
            under REPLACE_ONE with private labels, ``None`` means the counts are
            published exactly, and the result is ``math.inf``.
        private_labels: See :class:`Adjacency`; only meaningful for REPLACE_ONE.

    Returns:
        μ² >= 0 (possibly ``math.inf``).  The release is ``sqrt(μ²)``-GDP.
    """
    radius = check_finite_positive("clip_norm", clip_norm)
    x = _precision("noise_std_sum", noise_std_sum, radius, 1)
    y = _precision("noise_std_second_moment", noise_std_second_moment, radius, 2)
    adj = _check_adjacency(adjacency)
    check_bool("private_labels", private_labels)
    count_released = noise_std_count is not None
    v = _precision("noise_std_count", noise_std_count, 1.0, 1)
    needs_count_noise = adj is Adjacency.ADD_REMOVE or private_labels
    if needs_count_noise and not count_released:
        return math.inf
    if adj is Adjacency.ADD_REMOVE:
        return x + y + v
    same_class = _same_class_replace(x, y)
    if not private_labels:
        return same_class
    cross_class = 2.0 * x + 2.0 * y + 2.0 * v
    return max(same_class, cross_class)
