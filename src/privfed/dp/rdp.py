"""Rényi DP: the orders every curve is computed at and the one RDP → (ε, δ) conversion.

:class:`~privfed.dp.PrivacyLedger` reports the ε of an RDP-accounted ledger and
tests its budget with these two functions, and every RDP calibration
(:mod:`privfed.dp.distributed`, :mod:`privfed.dp.distributed_blocks`) solves and
certifies on them, so a calibrated release fits a ledger whose budget is the
target by construction.  The conversion is dp-accounting's
(``rdp_privacy_accountant.compute_epsilon`` / ``compute_delta``): Canonne, Kamath
& Steinke (2020, arXiv:2004.00010, Prop. 12; also Asoodeh et al. 2021), with the
Bretagnolle–Huber bound ``δ <= sqrt(1 − e^(−r))``.  The curves themselves carry
the floating-point margin (each is rounded up where it is computed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from privfed._checks import check_delta, check_finite_nonnegative
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "RDP_ORDERS",
    "check_orders",
    "meets_rdp_target",
    "rdp_delta",
    "rdp_epsilon",
]

#: The Rényi orders of every RDP curve and conversion: dp-accounting's default RDP
#: orders, so a calibration and the ledger's figure are computed on the same grid.
RDP_ORDERS: Final[tuple[float, ...]] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)]
    + [float(a) for a in range(11, 64)]
    + [128.0, 256.0, 512.0, 1024.0]
)


def check_orders(orders: Sequence[float]) -> npt.NDArray[np.float64]:
    """Rényi orders as a float64 array after checking they are finite and > 1.

    Raises:
        ParameterTypeError: Not a sequence of numbers.
        ParameterError: Empty, not one-dimensional, or an order not finite or <= 1.
    """
    try:
        alpha = np.asarray(orders, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterTypeError("orders", "a sequence of floats > 1", orders) from None
    if alpha.ndim != 1 or alpha.size == 0 or not np.all(np.isfinite(alpha)):
        raise ParameterError("orders", "a non-empty sequence of finite floats > 1", orders)
    if not np.all(alpha > 1.0):
        raise ParameterError("orders", "a non-empty sequence of finite floats > 1", orders)
    return alpha


def _curve(
    rdp: Sequence[float] | npt.NDArray[np.float64], orders: Sequence[float]
) -> tuple[list[float], list[float]]:
    alpha = check_orders(orders)
    try:
        values = np.asarray(rdp, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterTypeError("rdp", "a sequence of floats >= 0", rdp) from None
    if values.shape != alpha.shape:
        raise ParameterError("rdp", f"a sequence of {alpha.size} values (one per order)", rdp)
    if np.any(np.isnan(values)) or np.any(values < 0.0):
        raise ParameterError("rdp", "a sequence of floats >= 0 (inf allowed)", rdp)
    return alpha.tolist(), values.tolist()


def rdp_epsilon(
    rdp: Sequence[float] | npt.NDArray[np.float64],
    delta: float,
    *,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """ε at ``delta`` of a mechanism with RDP curve ``rdp`` at ``orders`` (the ledger's figure).

    ``ε = min_α r + log((α−1)/α) − log(δα)/(α−1)`` over the orders above 1.01,
    and ε = 0 when ``δ >= sqrt(1 − e^(−r))`` at some order (Bretagnolle–Huber
    with KL <= r): dp-accounting's ``compute_epsilon``.

    Args:
        rdp: ε(α) >= 0 per order (``inf`` allowed).
        delta: In (0, 1).
        orders: The orders (default :data:`RDP_ORDERS`, the ledger's grid).

    Returns:
        ε >= 0 (``inf`` when no order gives a finite bound).
    """
    alpha, values = _curve(rdp, orders)
    dlt = check_delta(delta)
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    eps, _ = rdp_lib.compute_epsilon(alpha, values, dlt)
    return max(0.0, float(eps))


def rdp_delta(
    rdp: Sequence[float] | npt.NDArray[np.float64],
    epsilon: float,
    *,
    orders: Sequence[float] = RDP_ORDERS,
) -> float:
    """δ at ``epsilon`` of a mechanism with RDP curve ``rdp`` (the ledger's budget test).

    The same conversion solved for δ: ``δ = min_α exp((α−1)(r − ε + log(1 − 1/α))
    − log α)`` over the orders above 1.01 and ``sqrt(1 − e^(−r))``, capped at 1:
    dp-accounting's ``compute_delta``.

    Args:
        rdp: ε(α) >= 0 per order.
        epsilon: ε >= 0, finite.
        orders: See :func:`rdp_epsilon`.
    """
    alpha, values = _curve(rdp, orders)
    eps = check_finite_nonnegative("epsilon", epsilon)
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    spent, _ = rdp_lib.compute_delta(alpha, values, eps)
    return float(spent)


def meets_rdp_target(
    rdp: Sequence[float] | npt.NDArray[np.float64], epsilon: float, delta: float
) -> bool:
    """Whether a curve at :data:`RDP_ORDERS` is (ε, δ)-DP as the ledger reports and tests it.

    Both the reported ε at δ and the budget test δ(ε) <= δ must hold.
    """
    return rdp_epsilon(rdp, delta) <= epsilon and rdp_delta(rdp, epsilon) <= delta
