"""The threshold policy and the client id mapping (privfed.secagg.threshold, .client_ids).

Properties over every roster size and n_C in range: the policy never returns a
threshold that breaks the protocol's security conditions (a strict majority,
``t > n_C``, ``2t > s + n_C`` in active mode, ``t >=`` the minimum), refuses
exactly the thresholds that break them, and names the parameter when it
refuses; partition ``p`` and client id ``p + 1`` round-trip and out-of-range
ids are refused with a typed error.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfed.errors import ParameterError, ParameterTypeError
from privfed.secagg import ClientId, ClientIds, SecAggConfig, ThresholdPolicy, majority_threshold
from privfed.secagg.protocol.config import MAX_CLIENT_ID
from privfed.secagg.threshold import (
    MIN_THRESHOLD,
    ThresholdRule,
    check_active_threshold,
    check_corrupted,
    check_protocol_threshold,
    requested_threshold,
)


def _secure(t: int, s: int, policy: ThresholdPolicy) -> bool:
    """The protocol's security conditions, written out independently of the policy."""
    return (
        MIN_THRESHOLD <= t <= s
        and t >= policy.minimum
        and 2 * t > s
        and t > policy.corrupted
        and (not policy.active or 2 * t > s + policy.corrupted)
    )


@st.composite
def _policies(draw: st.DrawFn) -> tuple[ThresholdPolicy, int]:
    size = draw(st.integers(2, 400))
    policy = ThresholdPolicy(
        active=draw(st.booleans()),
        corrupted=draw(st.integers(0, size - 2)),
        minimum=draw(st.integers(MIN_THRESHOLD, size + 2)),
    )
    return policy, size


@given(_policies())
def test_the_policy_threshold_is_secure_or_refused_naming_the_parameter(
    case: tuple[ThresholdPolicy, int],
) -> None:
    policy, size = case
    t = policy.default(size)
    assert t >= majority_threshold(size) and t >= policy.minimum
    if _secure(t, size, policy):
        assert policy.resolve(None, size) == t
    else:
        with pytest.raises(ParameterError, match="threshold") as info:
            policy.resolve(None, size)
        assert info.value.parameter == "threshold"


@given(_policies(), st.integers(-3, 403))
def test_the_policy_accepts_exactly_the_secure_thresholds(
    case: tuple[ThresholdPolicy, int], t: int
) -> None:
    policy, size = case
    assert (policy.violation(t, size) is None) == _secure(t, size, policy)
    if _secure(t, size, policy):
        assert policy.check(t, size, name="t") == t
        assert policy.corrupted <= policy.max_corrupted(t, size)
    else:
        with pytest.raises(ParameterError, match="'t'"):
            policy.check(t, size, name="t")


@given(st.integers(2, 400), st.data())
def test_the_majority_default_is_the_smallest_strict_majority(
    size: int, data: st.DataObject
) -> None:
    t = majority_threshold(size)
    assert 2 * t > size >= 2 * (t - 1)
    # n_C up to max_corrupted is admitted with it, one more is not (both modes).
    active = data.draw(st.booleans())
    limit = ThresholdPolicy(active=active).max_corrupted(t, size)
    for n_c in range(max(limit + 1, 0)):
        assert ThresholdPolicy(active=active, corrupted=n_c).violation(t, size) is None
    assert ThresholdPolicy(active=active, corrupted=limit + 1).violation(t, size) is not None


@given(st.integers(2, 60), st.data())
def test_the_protocol_config_and_the_policy_agree_on_the_active_rule(
    n: int, data: st.DataObject
) -> None:
    t = data.draw(st.integers(2, n))
    n_c = data.draw(st.integers(0, n - 2))
    holds = 2 * t > n + n_c
    if holds:
        check_active_threshold(t, n, n_c)
    else:
        with pytest.raises(ParameterError, match="threshold"):
            check_active_threshold(t, n, n_c)
    policy = ThresholdPolicy(active=True, corrupted=n_c)
    if policy.violation(t, n) is None:
        assert holds


def test_the_rules_are_named_in_order() -> None:
    policy = ThresholdPolicy(active=True, corrupted=2, minimum=4)
    assert policy.violation(1, 10) is ThresholdRule.RANGE
    assert policy.violation(11, 10) is ThresholdRule.RANGE
    assert policy.violation(3, 10) is ThresholdRule.MINIMUM
    assert ThresholdPolicy(corrupted=5).violation(5, 8) is ThresholdRule.ABOVE_CORRUPTED
    assert policy.violation(5, 10) is ThresholdRule.MAJORITY
    assert policy.violation(6, 10) is ThresholdRule.ACTIVE
    assert policy.violation(7, 10) is None
    assert "[7, 10]" in policy.domain(10)


def test_bad_policies_and_protocol_values_are_refused_by_name() -> None:
    with pytest.raises(ParameterError, match="minimum"):
        ThresholdPolicy(minimum=1)
    with pytest.raises(ParameterError, match="corrupted"):
        ThresholdPolicy(corrupted=-1)
    with pytest.raises(ParameterTypeError, match="active"):
        ThresholdPolicy(active="yes")  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="threshold"):
        ThresholdPolicy().check("3", 5)
    with pytest.raises(ParameterError, match="threshold"):
        check_protocol_threshold(1, 5)
    with pytest.raises(ParameterError, match="threshold"):
        check_protocol_threshold(6, 5)
    assert check_protocol_threshold(2, 5) == 2  # the protocol itself takes any t in [2, s]
    with pytest.raises(ParameterError, match=r"corrupted.*\[0, 3\]"):
        check_corrupted(4, 5)
    assert check_corrupted(3, 5) == 3


def test_no_threshold_is_none_and_a_run_config_writes_it_0_or_leaves_it_out() -> None:
    assert requested_threshold(None) is None
    assert requested_threshold(0) is None
    assert requested_threshold("0") is None
    assert requested_threshold(4) == 4
    assert requested_threshold("4") == 4
    with pytest.raises(ParameterError, match="threshold"):
        requested_threshold("four")
    assert ThresholdPolicy().resolve(None, 7) == 4
    # An explicit t of 0 is refused, never read as the default.
    with pytest.raises(ParameterError, match="threshold"):
        ThresholdPolicy().resolve(0, 7)
    with pytest.raises(ParameterError, match="threshold"):
        SecAggConfig(client_ids=(1, 2, 3), threshold=0, vector_length=1)


# -- client ids ------------------------------------------------------------------------------


@given(st.integers(1, 10_000), st.data())
def test_partition_and_client_ids_round_trip(n: int, data: st.DataObject) -> None:
    ids = ClientIds(n)
    pid = data.draw(st.integers(0, n - 1))
    cid = ids.protocol_id(pid)
    assert cid == pid + 1 and cid in ids
    assert ids.partition_id(cid) == pid
    pids = data.draw(st.lists(st.integers(0, n - 1), max_size=20))
    assert ids.partition_ids(ids.protocol_ids(pids)) == tuple(pids)


@given(st.integers(1, 10_000), st.data())
def test_out_of_range_ids_are_refused_with_a_typed_error(n: int, data: st.DataObject) -> None:
    ids = ClientIds(n)
    bad_pid = data.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=n)))
    with pytest.raises(ParameterError, match="partition_id"):
        ids.protocol_id(bad_pid)
    bad_cid = data.draw(st.one_of(st.integers(max_value=0), st.integers(min_value=n + 1)))
    assert bad_cid not in ids
    with pytest.raises(ParameterError, match="client_id"):
        ids.partition_id(bad_cid)


def test_the_roster_and_its_construction() -> None:
    ids = ClientIds(4)
    assert ids.client_ids == (1, 2, 3, 4)
    assert ids.of_nodes({1001: 0, 1003: 3}) == {1001: ClientId(1), 1003: ClientId(4)}
    assert ClientIds.from_partitions([2, 0]).num_clients == 3
    assert ClientIds.from_partitions([0], num_clients=5).num_clients == 5
    assert ClientIds.any().num_clients == MAX_CLIENT_ID
    assert True not in ids and "1" not in ids
    with pytest.raises(ParameterError, match="partition_id"):
        ClientIds.from_partitions([0, 5], num_clients=5)
    with pytest.raises(ParameterError, match="partition_id"):
        ClientIds.from_partitions([-1])
    with pytest.raises(ParameterError, match="num_clients"):
        ClientIds.from_partitions([])
    with pytest.raises(ParameterError, match="num_clients"):
        ClientIds(0)
    with pytest.raises(ParameterError, match="num_clients"):
        ClientIds(MAX_CLIENT_ID + 1)
    with pytest.raises(ParameterTypeError, match="client_id"):
        ids.partition_id(1.0)  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="partition_id"):
        ids.protocol_id(True)
