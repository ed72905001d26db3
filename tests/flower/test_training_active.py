"""Flower training in the active mode: ``secagg_mod`` with node-pinned policy (grid double).

The workflow runs with ``mode="active"`` and the server's copy of the
registry; each node's policy (its node config) pins its identity key, its
registry, the minimum threshold and n_C.  The aggregate is FedAvg's within a
grid step; a node refuses a weaker round before any key exists; the identity
key never reaches ``Context.state``.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flower_helpers import active_node_config
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from privfed.errors import ParameterError, ParameterTypeError
from privfed.flower import SecAggGrid, SecAggMod, SecAggWorkflow, _wire
from privfed.flower._training_wire import STAGE_FIELD
from privfed.flower.client import JournalIn
from privfed.flower.mod import TRAIN_STATE_KEY
from privfed.flower.policy import write_identity_key
from privfed.secagg import IdentityKey, IdentityRegistry

N = 5
SHAPE = (4, 3)
WEIGHTS = (11, 23, 37, 53, 71)
STEP = 2 * 8.0 / 2**22


def _delta(pid: int) -> np.ndarray:
    return np.random.default_rng(500 + pid).normal(0, 1.0, SHAPE)


def _app(tmp_path: Path, mods: Sequence[Any] = ()) -> ClientApp:
    app = ClientApp(mods=[*mods, SecAggMod(journal=JournalIn(tmp_path / "journals"))])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        arrays = msg.content.array_records["arrays"]
        new = ArrayRecord({"w": Array(arrays["w"].numpy() + _delta(pid))})
        metrics = MetricRecord({"num-examples": WEIGHTS[pid]})
        return Message(RecordDict({"arrays": new, "metrics": metrics}), reply_to=msg)

    return app


def _expected(pids: Iterable[int], rounds: int = 1) -> np.ndarray:
    model = np.zeros(SHAPE)
    for _ in range(rounds):
        chosen = list(pids)
        total = sum(WEIGHTS[p] for p in chosen)
        model = sum(WEIGHTS[p] * np.clip(model + _delta(p), -8, 8) for p in chosen) / total
    return np.asarray(model)


@pytest.fixture
def registry(tmp_path: Path) -> IdentityRegistry:
    keys = {cid: IdentityKey.generate() for cid in range(1, N + 1)}
    reg = IdentityRegistry.of(keys, assumed_corrupted=1)
    reg.save(tmp_path / "registry.json")
    for cid, key in keys.items():
        write_identity_key(tmp_path / f"node-{cid}.key", key)
    return reg


def _grid(loopback: type, tmp_path: Path, **policy: object) -> Any:
    class TrainGrid(loopback):  # type: ignore[misc]
        @property
        def run(self) -> Any:
            return types.SimpleNamespace(run_id=1)

    grid = TrainGrid(_app(tmp_path), N, first_node_id=7001)
    # Node ids and registry ids deliberately in another order: the server must ask.
    for i, context in enumerate(grid.contexts.values()):
        cid = N - i
        context.node_config.update(active_node_config(tmp_path, cid, **policy))
    return grid


def _start(grid: Any, flow: SecAggWorkflow, rounds: int = 1) -> Any:
    strategy = FedAvg(fraction_evaluate=0.0, min_train_nodes=N, min_available_nodes=N)
    initial = ArrayRecord({"w": Array(np.zeros(SHAPE))})
    return strategy.start(grid=SecAggGrid(grid, flow), initial_arrays=initial, num_rounds=rounds)


def _active(registry: IdentityRegistry, threshold: int = 4, **kw: Any) -> SecAggWorkflow:
    return SecAggWorkflow(
        N, threshold, mode="active", identities=registry, corrupted=1, rounding="nearest", **kw
    )


def test_active_training_rounds_give_fedavg_within_a_step(
    loopback: type, tmp_path: Path, registry: IdentityRegistry
) -> None:
    grid = _grid(loopback, tmp_path)
    flow = _active(registry)
    result = _start(grid, flow, rounds=2)
    got = result.arrays["w"].numpy()
    assert np.all(np.abs(got - _expected(range(N), rounds=2)) <= STEP)
    assert np.abs(_expected(range(N))).max() > 1000 * STEP
    assert [r.survivors for r in flow.reports] == [tuple(grid.contexts)] * 2
    # The nodes were asked who they are once; the registry's ids, not the node order.
    assert flow.identified == {7001 + i: N - i for i in range(N)}
    assert all(r.skipped is None and not r.refused for r in flow.reports)
    assert "consist" in flow.reports[0].dropped and flow.reports[0].dropped["consist"] == ()


def test_the_identity_key_never_reaches_the_training_state(
    loopback: type, tmp_path: Path, registry: IdentityRegistry
) -> None:
    grid = _grid(loopback, tmp_path)
    _start(grid, _active(registry))
    for i, context in enumerate(grid.contexts.values()):
        pem = (tmp_path / f"node-{N - i}.key").read_bytes()
        protocol = context.state.config_records[TRAIN_STATE_KEY]["state"]
        assert isinstance(protocol, bytes) and len(protocol) > 1000
        # Every record of the node's state (protocol state, encoding, anything else).
        blob = b"".join(
            item if isinstance(item, bytes) else str(item).encode()
            for record in context.state.config_records.values()
            for value in record.values()
            for item in (value if isinstance(value, list) else [value])
        )
        key = IdentityKey(_raw(pem))
        assert key.private_bytes() not in blob and b"PRIVATE KEY" not in blob
        # The registry's root is there (the client holds it in place of the registry).
        assert registry.commitment.root.hex().encode() in blob


def _raw(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return key.private_bytes_raw()


@pytest.mark.parametrize(
    ("policy", "flow_kw", "words"),
    [
        ({}, {"mode": "semi-honest"}, "mode 'semi-honest' is below"),
        ({"min_threshold": 5}, {}, "privfed-min-threshold 5"),
        ({"corrupted": 2}, {"threshold": 5}, "corrupted 1 is below"),
    ],
    ids=["semi-honest", "threshold", "corrupted"],
)
def test_every_node_refuses_a_weaker_training_round_and_the_model_stays(
    loopback: type,
    tmp_path: Path,
    registry: IdentityRegistry,
    caplog: pytest.LogCaptureFixture,
    policy: dict[str, object],
    flow_kw: dict[str, Any],
    words: str,
) -> None:
    grid = _grid(loopback, tmp_path, **policy)
    if flow_kw.get("mode") == "semi-honest":
        flow = SecAggWorkflow(N, 4, rounding="nearest", corrupted=1)
    else:
        flow = _active(registry, **flow_kw)
    result = _start(grid, flow)
    assert len(result.arrays) == 0  # Flower's Result: no round produced arrays
    (report,) = flow.reports
    assert report.skipped is not None
    assert report.dropped["advertise"] == tuple(grid.contexts)
    refusals = [m for m in caplog.messages if "policy refuses the round" in m]
    assert len(refusals) == N and all(words in m for m in refusals), caplog.messages
    assert all(TRAIN_STATE_KEY not in c.state.config_records for c in grid.contexts.values())


def test_an_active_workflow_needs_a_registry() -> None:
    with pytest.raises(ParameterTypeError, match="identities"):
        SecAggWorkflow(N, 4, mode="active")
    with pytest.raises(ParameterError, match="mode"):
        SecAggWorkflow(N, 4, mode="paranoid")


def test_a_threshold_breaking_the_active_rule_skips_the_round(
    loopback: type, tmp_path: Path, registry: IdentityRegistry
) -> None:
    """2t > s + n_C fails for t = 3 of 5 with n_C = 1: no message but the identify stage."""
    grid = _grid(loopback, tmp_path)
    flow = _active(registry, threshold=3)
    result = _start(grid, flow)
    assert len(result.arrays) == 0
    assert flow.reports[0].skipped is not None and "threshold" in flow.reports[0].skipped


def test_a_node_claiming_another_nodes_id_is_left_out_alone(
    loopback: type, tmp_path: Path, registry: IdentityRegistry
) -> None:
    """A node answers ``identify`` with its neighbour's id: its signature fails, only it is out."""
    from flwr.clientapp.typing import ClientAppCallable

    grid = _grid(loopback, tmp_path)
    liar, victim = 7001, 7002  # registry ids 5 and 4

    def claim(msg: Message, ctxt: Context, call_next: ClientAppCallable) -> Message:
        record = msg.content.config_records.get(_wire.RECORD)
        if record is not None and record.get(STAGE_FIELD) == "identify":
            claimed.append(4)
            fields = ConfigRecord({"client-id": 4, "signature": bytes(64)})
            return Message(RecordDict({_wire.RECORD: fields}), reply_to=msg)
        return call_next(msg, ctxt)

    grid.apps[liar] = _app(tmp_path, [claim])
    claimed: list[int] = []
    flow = _active(registry)
    result = _start(grid, flow)
    (report,) = flow.reports
    assert claimed == [4]  # the liar answered (it did not just fail)
    assert report.dropped["identify"] == (liar,)
    assert victim in report.survivors and liar not in report.survivors
    assert flow.identified[victim] == 4 and liar not in flow.identified
    got = result.arrays["w"].numpy()
    assert np.all(np.abs(got - _expected(range(1, N))) <= STEP)


def test_active_secagg_plus_training_plays_the_graph_seed_committee(
    loopback: type, tmp_path: Path, registry: IdentityRegistry
) -> None:
    """A sparse graph (3 shares of 5 nodes) in active mode: the committee reveals over the
    training messages (stage "reveal") before the roster, and FedAvg comes out within a step."""
    stages: list[str] = []

    def record(msg: Message, context: Context, call_next: Any) -> Message:
        record = msg.content.config_records.get(_wire.RECORD)
        if record is not None and STAGE_FIELD in record:
            stages.append(str(record[STAGE_FIELD]))
        return call_next(msg, context)

    grid = _grid(loopback, tmp_path, min_threshold=3)
    grid.app = _app(tmp_path, mods=[record])
    flow = SecAggWorkflow(3, 3, mode="active", identities=registry, corrupted=1, rounding="nearest")
    result = _start(grid, flow)
    assert flow.reports[0].skipped is None, flow.reports[0].skipped
    got = result.arrays["w"].numpy()
    assert np.all(np.abs(got - _expected(range(N))) <= STEP)
    assert stages.count("reveal") >= 1 and stages.index("reveal") < stages.index("share")
