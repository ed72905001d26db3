"""The one RDP -> (ε, δ) conversion: the ledger's orders and dp-accounting's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given
from hypothesis import strategies as st

from privfed.dp.rdp import RDP_ORDERS, rdp_delta, rdp_epsilon
from privfed.errors import ParameterError

ORDERS = np.asarray(RDP_ORDERS)


def test_orders_are_the_ledgers() -> None:
    assert tuple(float(a) for a in rdp_lib.DEFAULT_RDP_ORDERS) == RDP_ORDERS


@given(
    rho=st.floats(1e-6, 10.0),
    xi=st.floats(0.0, 1.0),
    delta=st.floats(1e-12, 1e-2),
)
def test_conversion_is_dp_accountings(rho: float, xi: float, delta: float) -> None:
    curve = xi + rho * ORDERS
    eps = rdp_epsilon(curve, delta)
    reference, _ = rdp_lib.compute_epsilon(RDP_ORDERS, list(curve), delta)
    assert reference <= eps <= reference * (1 + 1e-9) + 1e-12
    assert eps == max(0.0, reference)  # the ledger's figure, exactly
    spent = rdp_delta(curve, eps)
    assert spent <= delta * (1 + 1e-6)
    assert rdp_delta(curve, eps) >= rdp_lib.compute_delta(RDP_ORDERS, list(curve), eps)[0]
    assert spent == rdp_lib.compute_delta(RDP_ORDERS, list(curve), eps)[0]


def test_conversion_arguments_are_checked() -> None:
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0, 2.0], 1e-5)  # length differs from the orders
    with pytest.raises(ParameterError):
        rdp_epsilon([-1.0], 1e-5, orders=[2.0])
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0], 1e-5, orders=[1.0])
    with pytest.raises(ParameterError):
        rdp_epsilon([1.0], 0.0, orders=[2.0])
    assert rdp_epsilon([math.inf], 1e-5, orders=[2.0]) == math.inf
    assert rdp_epsilon([0.0], 1e-5, orders=[2.0]) == 0.0
