"""The Flower workflow and handlers through an in-process Grid (no Ray, well under a second)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import ConfigRecord, RecordDict
from flwr.clientapp import ClientApp

from privfed.errors import MessageFormatError, ParameterError, ProtocolAbort
from privfed.flower import SecAggRound, _wire, add_secagg_handlers, hello
from privfed.flower.client import STATE_KEY, JournalIn
from privfed.flower.faults import fault_mod
from privfed.flower.secagg_app import demo_values, expected_sum, sum_client_app
from privfed.secagg import MaskedInput, Stage

LENGTH = 64


@pytest.fixture
def make_grid(loopback: Any, tmp_path: Path) -> Any:
    def make(n: int, faults: Any = None) -> Any:
        app = sum_client_app(faults=faults, fault_delay=0.0, journal=JournalIn(tmp_path))
        return loopback(app, n)

    return make


def test_hello_maps_nodes_to_partitions(make_grid: Any) -> None:
    grid = make_grid(4)
    assert hello(grid, grid.get_node_ids()) == {1001: 0, 1002: 1, 1003: 2, 1004: 3}


def test_a_round_sums_exactly_and_reports_costs(make_grid: Any) -> None:
    grid = make_grid(5)
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0)
    result = flow.run(
        grid, {node: pid + 1 for node, pid in hello(grid, grid.get_node_ids()).items()}
    )
    np.testing.assert_array_equal(result.total, expected_sum(range(5), 0, LENGTH))
    assert result.survivors == (1, 2, 3, 4, 5)
    assert all(v > LENGTH * 8 for v in result.bytes_received.values())
    assert set(result.server_seconds) == {Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS,
                                          Stage.MASKED_INPUT, Stage.UNMASKING}  # fmt: skip
    # The masked input travelled as a Flower array, not as bytes.
    masked = [m for m in grid.delivered if _wire.ARRAYS in m.content.array_records]
    assert len(masked) == 5


def test_the_sender_is_the_delivering_node(make_grid: Any) -> None:
    """A masked input in another client's name is refused; the others' sum is exact."""
    grid = make_grid(5, {(0, 1): (Stage.MASKED_INPUT, "forge")})
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0)
    result = flow.run(grid, {1001 + i: i + 1 for i in range(5)})
    assert 2 in result.refused and "delivered by client 2" in result.refused[2]
    assert result.survivors == (1, 3, 4, 5)
    np.testing.assert_array_equal(result.total, expected_sum([0, 2, 3, 4], 0, LENGTH))


def test_a_rolled_back_node_refuses_and_drops_out(make_grid: Any) -> None:
    grid = make_grid(5, {(0, 3): (Stage.UNMASKING, "rollback")})
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0)
    result = flow.run(grid, {1001 + i: i + 1 for i in range(5)})
    assert "rolled-back" in result.errors[4]
    assert result.dropped[Stage.UNMASKING] == (4,)
    # Its masked input is in the sum (it dropped after sending it).
    np.testing.assert_array_equal(result.total, expected_sum(range(5), 0, LENGTH))


def test_below_the_threshold_the_round_aborts_before_any_reveal(make_grid: Any) -> None:
    faults = {(0, p): (Stage.MASKED_INPUT, "raise") for p in (0, 1, 2)}
    grid = make_grid(5, faults)
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0)
    with pytest.raises(ProtocolAbort, match="threshold is 3") as info:
        flow.run(grid, {1001 + i: i + 1 for i in range(5)})
    assert info.value.stage == "MASKED_INPUT"
    assert not any(m.metadata.message_type.endswith("unmask") for m in grid.delivered)


def test_a_reply_from_an_unasked_node_is_ignored(make_grid: Any) -> None:
    grid = make_grid(4)
    flow = SecAggRound(threshold=2, vector_length=LENGTH, timeout=1.0)
    # Node 1004 exists but is not part of the round.
    result = flow.run(grid, {1001: 1, 1002: 2, 1003: 3})
    assert result.survivors == (1, 2, 3)
    assert not any(m.metadata.src_node_id == 1004 for m in grid.delivered)


def test_a_node_keeps_no_input_in_its_stored_state(make_grid: Any) -> None:
    grid = make_grid(3)
    SecAggRound(threshold=2, vector_length=LENGTH, timeout=1.0).run(grid, [1001, 1002, 1003])
    blob = grid.contexts[1001].state.config_records[STATE_KEY]["state"]
    assert isinstance(blob, bytes)
    assert demo_values(0, 0, LENGTH).tobytes() not in blob


def test_malformed_payloads_are_typed_errors() -> None:
    with pytest.raises(MessageFormatError):
        _wire.config_record(RecordDict())
    with pytest.raises(MessageFormatError):
        _wire.get_bytes(ConfigRecord({"message": 3}), "message")
    with pytest.raises(MessageFormatError):
        _wire.parse_masked_input(RecordDict({_wire.RECORD: ConfigRecord({"session": b"x"})}))
    good = MaskedInput(session_id=bytes(32), round_index=0, sender=1, ring_bits=64,
                       values=np.arange(4, dtype=np.uint64))  # fmt: skip
    again = _wire.parse_masked_input(_wire.masked_input_content(good))
    assert again == good


def test_bad_workflow_arguments_are_refused(loopback: Any) -> None:
    with pytest.raises(ParameterError, match="threshold"):
        SecAggRound(threshold=1, vector_length=4)
    with pytest.raises(ParameterError, match="timeout"):
        SecAggRound(threshold=2, vector_length=4, timeout=0.0)
    flow = SecAggRound(threshold=2, vector_length=4)
    grid = loopback(add_secagg_handlers(ClientApp(), lambda c, k: np.zeros(4, np.uint64)), 2)
    with pytest.raises(ParameterError, match="clients"):
        flow.run(grid, {1001: 1, 1002: 1})
    with pytest.raises(ParameterError, match="fault"):
        fault_mod({(0, 0): (Stage.UNMASKING, "explode")})


def test_a_node_takes_part_in_a_session_once(make_grid: Any) -> None:
    """Asked to advertise fresh keys for a session it already answered, a node refuses."""
    grid = make_grid(3)
    flow = SecAggRound(threshold=2, vector_length=LENGTH, timeout=1.0)
    session = bytes(range(32))
    flow.run(grid, [1001, 1002, 1003], session_id=session)
    with pytest.raises(ProtocolAbort, match="threshold is 2") as info:
        flow.run(grid, [1001, 1002, 1003], session_id=session)
    assert info.value.stage == "ADVERTISE_KEYS"
    last = grid.delivered[-3:]
    assert all(m.has_error() and "already took part" in m.error.reason for m in last)


def test_a_node_takes_part_in_a_session_once_under_any_client_id(
    loopback: Any, tmp_path: Path
) -> None:
    """Fresh keys under another client id in a session already answered: refused."""
    from privfed.errors import ProtocolAbort
    from privfed.flower import SecAggRound

    grid = loopback(sum_client_app(journal=JournalIn(tmp_path)), 4)
    flow = SecAggRound(threshold=3, vector_length=8, timeout=1.0)
    session = bytes(range(32))
    flow.run(grid, {1001 + i: i + 1 for i in range(4)}, session_id=session)
    shifted = {1001 + i: (i + 1) % 4 + 1 for i in range(4)}  # every node under another id
    with pytest.raises(ProtocolAbort):
        flow.run(grid, shifted, session_id=session)
    errors = [m.error.reason for m in grid.delivered[-4:] if m.has_error()]
    assert len(errors) == 4 and all("already took part in that session" in e for e in errors)


def test_no_node_helps_unmask_a_sum_with_fewer_than_two_honest_inputs(make_grid: Any) -> None:
    """3 nodes, n_C = 1, one dropout: the 2 survivors' sum could be one honest input."""
    M = Stage.MASKED_INPUT
    grid = make_grid(3, faults={(0, 0): (M, "raise")})
    flow = SecAggRound(
        threshold=2, vector_length=LENGTH, timeout=1.0, config_fields={"corrupted": 1}
    )
    with pytest.raises(ProtocolAbort) as info:
        flow.run(grid, {1001 + i: i + 1 for i in range(3)})
    assert info.value.stage == "UNMASKING"
    errors = [m.error.reason for m in grid.delivered if m.has_error()]
    assert sum("fewer than 2 honest inputs" in e for e in errors) == 2
    # With n_C = 0 the same dropout leaves two honest inputs: the round completes.
    again = make_grid(3, faults={(0, 0): (M, "raise")})
    done = SecAggRound(threshold=2, vector_length=LENGTH, timeout=1.0).run(
        again, {1001 + i: i + 1 for i in range(3)}
    )
    assert done.survivors == (2, 3)


def test_a_one_shot_job_threshold_comes_from_the_policy() -> None:
    """Run config ``threshold``: 0 or absent is the strict majority; others are checked first."""
    from privfed.flower.server import round_threshold

    assert round_threshold({}, 5, {}) == 3
    assert round_threshold({"threshold": 0}, 6, {}) == 4
    assert round_threshold({"threshold": 5}, 6, {}) == 5
    # Every node would refuse these rounds: the server refuses them before asking any.
    with pytest.raises(ParameterError, match="threshold"):
        round_threshold({"threshold": 2}, 5, {})
    active = {"mode": "active", "corrupted": 1}
    assert round_threshold({"threshold": 4}, 5, active) == 4
    assert round_threshold({}, 6, active) == 4  # 2t > 6 + 1
    # The majority 3 of 5 breaks 2t > 5 + 1: refused, never silently raised.
    with pytest.raises(ParameterError, match="threshold"):
        round_threshold({}, 5, active)


def test_a_secagg_plus_round_sums_exactly_with_roster_proofs(make_grid: Any) -> None:
    """SecAgg+ through the grid: each node gets its neighbourhood and a proof of the root."""
    grid = make_grid(8)
    flow = SecAggRound(threshold=3, vector_length=LENGTH, timeout=1.0, graph="harary", degree=4)
    result = flow.run(
        grid, {node: pid + 1 for node, pid in hello(grid, grid.get_node_ids()).items()}
    )
    np.testing.assert_array_equal(result.total, expected_sum(range(8), 0, LENGTH))
    assert result.survivors == tuple(range(1, 9))
