"""Flower training with privfed's secure aggregation, over the in-process Grid (no Ray).

Message-API strategies run through :class:`~privfed.flower.SecAggGrid`, legacy
ones through :class:`~privfed.flower.SecAggWorkflow` inside Flower's
``DefaultWorkflow``; nodes run :func:`~privfed.flower.secagg_mod` (a
:class:`~privfed.flower.SecAggMod` with a journal in ``tmp_path``).

Accuracy bound checked here: per coordinate the secure aggregate differs from
plain FedAvg's weighted average (computed in float64 from the plaintext
updates) by less than one grid step ``2 * clipping_range / quantization_range``
with stochastic rounding, and by at most half a step with nearest rounding
(a weighted mean of per-node rounding errors each below that), plus the
float32 rounding of the result (``2**-24`` relative) for float32 arrays.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp
from flwr.common import ndarrays_to_parameters
from flwr.server import ServerConfig
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg as LegacyFedAvg
from flwr.server.workflow import DefaultWorkflow
from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
from flwr.serverapp.strategy import FedAvg

from privfed.errors import ParameterError, ParameterTypeError, RingOverflowError
from privfed.flower import SecAggGrid, SecAggMod, SecAggWorkflow, _wire, secagg_mod
from privfed.flower._training_wire import (
    ENCODING_FIELD,
    INSTRUCTIONS_FIELD,
    NONCE_FIELD,
    STAGE_FIELD,
    STRUCTURE_FIELD,
    ArraySpec,
    TrainingEncoding,
    array_layout,
    training_session_id,
)
from privfed.flower.client import JournalIn
from privfed.flower.mod import TRAIN_STATE_KEY
from privfed.flower.training import TrainingRoundState
from privfed.secagg import AdvertiseKeys, SecAggConfig, decode_message
from privfed.secagg.protocol.state import encode_config

N = 5
SHAPES = {"conv.weight": ((3, 2, 2), np.float32), "conv.bias": ((3,), np.float64)}
WEIGHTS = (11, 23, 37, 53, 71)  # distinct, and no sum of a subset equals one of them
STEP = 2 * 8.0 / 2**22  # Flower's default clipping_range and quantization_range


def _train_grid(base: type) -> type:
    """A LoopbackGrid with a run (for DefaultWorkflow) that can hold replies back.

    ``withhold`` maps a training stage to partition ids whose replies to it
    are held back (as after a timeout) and delivered with the next call's
    replies (late).
    """

    class TrainGrid(base):  # type: ignore[misc]
        def __init__(
            self, app: ClientApp, n: int, withhold: Mapping[str, set[int]] | None = None
        ) -> None:
            super().__init__(app, n)
            self.withhold = dict(withhold or {})
            self.late: list[Message] = []

        @property
        def run(self) -> Any:
            return types.SimpleNamespace(run_id=1)

        def send_and_receive(
            self, messages: Iterable[Message], *, timeout: float | None = None
        ) -> Iterable[Message]:
            batch = list(messages)
            replies = list(super().send_and_receive(batch, timeout=timeout))
            stale, self.late = self.late, []
            fresh = []
            for sent, reply in zip(batch, replies, strict=True):
                stage = _stage(sent)
                pid = int(self.contexts[sent.metadata.dst_node_id].node_config["partition-id"])
                if stage is not None and pid in self.withhold.get(stage, set()):
                    self.late.append(reply)
                else:
                    fresh.append(reply)
            return fresh + stale

    return TrainGrid


@pytest.fixture
def make_grid(loopback: type) -> Any:
    """``make_grid(app, n, withhold=None)``: a training grid of ``n`` nodes running ``app``."""
    return _train_grid(loopback)


def _stage(message: Message) -> str | None:
    if not message.has_content():
        return None
    record = message.content.config_records.get(_wire.RECORD)
    value = None if record is None else record.get(STAGE_FIELD)
    return value if isinstance(value, str) else None


def _pid(context: Context) -> int:
    return int(context.node_config["partition-id"])


def deltas(pid: int) -> dict[str, npt.NDArray[np.floating]]:
    """Node ``pid``'s update (its new arrays minus the instructions'), some values clipped."""
    rng = np.random.default_rng(1000 + pid)
    return {
        name: rng.normal(0, 2.0, shape).astype(dtype) for name, (shape, dtype) in SHAPES.items()
    }


def initial() -> ArrayRecord:
    return ArrayRecord(
        {name: Array(np.full(shape, 0.25, dtype)) for name, (shape, dtype) in SHAPES.items()}
    )


def reply_of(pid: int, arrays: ArrayRecord, weight: float | None = None) -> RecordDict:
    new = {
        name: Array((array.numpy() + deltas(pid)[name]).astype(array.numpy().dtype))
        for name, array in arrays.items()
    }
    metrics = MetricRecord(
        {
            "num-examples": WEIGHTS[pid] if weight is None else weight,
            "train_loss": 1.0 + pid,
            "accuracy": 0.1 * pid,
        }
    )
    return RecordDict({"arrays": ArrayRecord(new), "metrics": metrics})


def message_app(tmp_path: Path, mods: Sequence[Any] = ()) -> ClientApp:
    app = ClientApp(mods=[*mods, SecAggMod(journal=JournalIn(tmp_path / "journals"))])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        if _wire.RECORD in msg.content.config_records:
            raise AssertionError("the train handler sees privfed's record")
        return Message(reply_of(_pid(context), msg.content.array_records["arrays"]), reply_to=msg)

    return app


def fedavg(pids: Iterable[int], cap: float = 1000.0) -> dict[str, npt.NDArray[np.float64]]:
    """Plain FedAvg of the nodes' clipped plaintext updates (float64)."""
    weights = {p: min(WEIGHTS[p], int(cap)) for p in pids}
    total = sum(weights.values())
    out = {}
    for name in SHAPES:
        base = initial()[name].numpy().astype(np.float64)
        values = [
            np.clip(base + deltas(p)[name].astype(base.dtype.type), -8.0, 8.0) for p in weights
        ]
        mean = sum(w * v for w, v in zip(weights.values(), values, strict=True)) / total
        out[name] = np.asarray(mean, dtype=np.float64)
    return out


class RecordingFedAvg(FedAvg):
    """FedAvg that keeps every list of train replies it is asked to aggregate."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(fraction_evaluate=0.0, min_train_nodes=N, min_available_nodes=N, **kwargs)
        self.seen: list[list[Message]] = []
        self.offered: list[ArrayRecord] = []

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Any
    ) -> Iterable[Message]:
        self.offered.append(arrays)
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> Any:
        replies = list(replies)
        self.seen.append(replies)
        return super().aggregate_train(server_round, replies)


def start(grid: Any, flow: SecAggWorkflow, rounds: int = 1) -> Any:
    strategy = RecordingFedAvg()
    result = strategy.start(
        grid=SecAggGrid(grid, flow), initial_arrays=initial(), num_rounds=rounds
    )
    return strategy, result


def assert_close_to(result: ArrayRecord, expected: Mapping[str, np.ndarray], bound: float) -> None:
    assert list(result.keys()) == list(SHAPES)
    for name, (shape, dtype) in SHAPES.items():
        got = result[name].numpy()
        assert got.shape == shape and got.dtype == dtype, name
        slack = bound + 2.0**-24 * np.abs(expected[name]) * (dtype == np.float32)
        assert np.all(np.abs(got - expected[name]) <= slack), name


# -- the aggregate --------------------------------------------------------------------


@pytest.mark.parametrize(("num_shares", "rounding"), [(N, "stochastic"), (3, "nearest")])
def test_message_api_aggregate_is_fedavg_within_a_step(
    make_grid: Any, tmp_path: Path, num_shares: int, rounding: str
) -> None:
    """Complete graph and a SecAgg+ graph (3 shares of 5); float32 and float64 arrays."""
    grid = make_grid(message_app(tmp_path), N)
    # A strict majority of each neighbourhood (the nodes' default policy): 3 of 5, 2 of 3.
    threshold = num_shares // 2 + 1
    flow = SecAggWorkflow(num_shares, threshold, rounding=rounding)  # type: ignore[arg-type]
    _, result = start(grid, flow)
    bound = STEP if rounding == "stochastic" else STEP / 2
    assert_close_to(result.arrays, fedavg(range(N)), bound)
    # The bound is not vacuous: the updates move the model by far more than a step.
    assert np.abs(fedavg(range(N))["conv.bias"] - 0.25).max() > 1000 * STEP
    total = sum(WEIGHTS)
    loss = sum(w * (1.0 + p) for p, w in enumerate(WEIGHTS)) / total
    metrics = result.train_metrics_clientapp[1]
    assert abs(metrics["train_loss"] - loss) < 1e-4
    assert abs(metrics["accuracy"] - sum(w * 0.1 * p for p, w in enumerate(WEIGHTS)) / total) < 1e-4
    assert flow.reports[0].survivors == tuple(grid.contexts)


def test_legacy_numpy_client_in_default_workflow(make_grid: Any, tmp_path: Path) -> None:
    """NumPyClient + DefaultWorkflow + legacy FedAvg: two imports and two lines changed."""
    received: list[tuple[list[Any], list[Any]]] = []

    class Recording(LegacyFedAvg):
        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            received.append((list(results), list(failures)))
            return super().aggregate_fit(server_round, results, failures)

    class Client(NumPyClient):
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def fit(self, parameters: list[np.ndarray], config: Any) -> Any:
            new = [p + d for p, d in zip(parameters, deltas(self.pid).values(), strict=True)]
            return new, WEIGHTS[self.pid], {"train_loss": 1.0 + self.pid, "note": "text"}

        def evaluate(self, parameters: list[np.ndarray], config: Any) -> Any:
            return 0.5 + self.pid, 10, {}

    def client_fn(context: Context) -> Any:
        return Client(_pid(context)).to_client()

    app = ClientApp(client_fn=client_fn, mods=[SecAggMod(journal=JournalIn(tmp_path))])
    grid = make_grid(app, N)
    strategy = Recording(
        min_evaluate_clients=N,
        min_fit_clients=N,
        min_available_clients=N,
        initial_parameters=ndarrays_to_parameters([a.numpy() for a in initial().values()]),
        fit_metrics_aggregation_fn=lambda pairs: {"pairs": len(pairs), **pairs[0][1]},
    )
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        config=ServerConfig(num_rounds=1),
        strategy=strategy,
    )
    DefaultWorkflow(fit_workflow=SecAggWorkflow(num_shares=3, reconstruction_threshold=2))(
        grid, context
    )
    final = context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()
    result = ArrayRecord({name: Array(a) for name, a in zip(SHAPES, final, strict=True)})
    assert_close_to(result, fedavg(range(N)), STEP)
    # The strategy saw one result: the aggregate, not a node.
    [(results, failures)] = received
    assert len(results) == 1 and failures == []
    fitres = results[0][1]
    assert fitres.num_examples == sum(WEIGHTS)
    assert set(fitres.metrics) == {"train_loss"}  # the string metric never left a node
    assert context.history.metrics_distributed_fit["pairs"] == [(1, 1)]
    # Evaluation is Flower's own (not secured): the mod passed it through.
    assert context.history.losses_distributed == [(1, 2.5)]


def test_flower_dp_shape_fixedclipping_mod_after_secagg_mod(make_grid: Any, tmp_path: Path) -> None:
    """examples/fl-dp-sa's stack: clients clip with fixedclipping_mod, the server wraps FedAvg.

    Noise multiplier 0 keeps the check exact: the aggregate is FedAvg of the
    clipped updates within half a step (plus float32 rounding).
    """
    from flwr.client.mod import fixedclipping_mod
    from flwr.server.strategy import DifferentialPrivacyClientSideFixedClipping

    class Client(NumPyClient):
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def fit(self, parameters: list[np.ndarray], config: Any) -> Any:
            new = [p + d for p, d in zip(parameters, deltas(self.pid).values(), strict=True)]
            return new, WEIGHTS[self.pid], {}

    mods: list[Any] = [SecAggMod(journal=JournalIn(tmp_path)), fixedclipping_mod]
    app = ClientApp(client_fn=lambda context: Client(_pid(context)).to_client(), mods=mods)
    start_params = [a.numpy() for a in initial().values()]
    inner = LegacyFedAvg(
        fraction_evaluate=0.0, min_fit_clients=N, min_available_clients=N,
        initial_parameters=ndarrays_to_parameters(start_params),
    )  # fmt: skip
    strategy = DifferentialPrivacyClientSideFixedClipping(
        inner, noise_multiplier=0.0, clipping_norm=1.0, num_sampled_clients=N
    )
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        config=ServerConfig(num_rounds=1),
        strategy=strategy,
    )
    flow = SecAggWorkflow(num_shares=N, reconstruction_threshold=3, rounding="nearest")
    DefaultWorkflow(fit_workflow=flow)(make_grid(app, N), context)
    final = context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()
    total = sum(WEIGHTS)
    for i, name in enumerate(SHAPES):
        clipped = []
        for pid in range(N):
            update = list(deltas(pid).values())
            norm = np.sqrt(sum(float(np.sum(u.astype(np.float64) ** 2)) for u in update))
            clipped.append(update[i].astype(np.float64) * min(1.0, 1.0 / norm))
        mean = sum(w * c for w, c in zip(WEIGHTS, clipped, strict=True)) / total
        want = start_params[i].astype(np.float64) + mean
        assert np.all(np.abs(final[i] - want) <= STEP / 2 + 1e-6), name
        assert np.abs(mean).max() > 100 * STEP  # the clipped updates moved the model


def test_evaluate_messages_pass_the_grid_as_they_are(make_grid: Any, tmp_path: Path) -> None:
    app = message_app(tmp_path)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        metrics = MetricRecord({"eval_loss": float(_pid(context)), "num-examples": 10})
        return Message(RecordDict({"metrics": metrics}), reply_to=msg)

    grid = make_grid(app, N)
    strategy = FedAvg(min_train_nodes=N, min_evaluate_nodes=N, min_available_nodes=N)
    result = strategy.start(
        grid=SecAggGrid(grid, SecAggWorkflow(N, 3)), initial_arrays=initial(), num_rounds=1
    )
    assert result.evaluate_metrics_clientapp[1]["eval_loss"] == pytest.approx(2.0)
    evaluated = [m for m in grid.delivered if m.metadata.message_type == "evaluate"]
    assert len(evaluated) == N and all(_wire.RECORD not in m.content for m in evaluated)


def test_weights_are_capped_at_max_weight(make_grid: Any, tmp_path: Path) -> None:
    grid = make_grid(message_app(tmp_path), N)
    flow = SecAggWorkflow(N, 3, max_weight=30.5, rounding="nearest")
    strategy, result = start(grid, flow)
    capped = [min(w, 30) for w in WEIGHTS]
    [[reply]] = strategy.seen
    assert reply.content["metrics"]["num-examples"] == sum(capped)
    assert_close_to(result.arrays, fedavg(range(N), cap=30.5), STEP / 2)
    # Uncapped weights give a different average: the cap is what made them agree.
    assert np.abs(fedavg(range(N))["conv.bias"] - fedavg(range(N), 30.5)["conv.bias"]).max() > STEP


def test_the_strategy_never_sees_a_nodes_count_or_metrics(make_grid: Any, tmp_path: Path) -> None:
    grid = make_grid(message_app(tmp_path), N)
    strategy, _ = start(grid, SecAggWorkflow(N, 3))
    [[reply]] = strategy.seen
    assert reply.metadata.src_node_id == 0  # from no single node
    assert list(reply.content.array_records) == ["arrays"]
    [metrics] = reply.content.metric_records.values()
    assert dict(metrics)["num-examples"] == sum(WEIGHTS)
    per_node = (
        {float(w) for w in WEIGHTS} | {1.0 + p for p in range(N)} | {0.1 * p for p in range(N)}
    )
    assert not per_node & {float(v) for v in dict(metrics).values()}
    # What the nodes sent: masked vectors and public structure, no counts or metrics.
    for sent in grid.delivered:
        assert not sent.content.metric_records
        for record in sent.content.config_records.values():
            for value in record.values():
                assert not (isinstance(value, (int, float)) and value in WEIGHTS)


# -- dropouts -----------------------------------------------------------------------


def dropping(stage: str, pids: set[int]) -> Callable[..., Message]:
    """A mod before secagg_mod: partitions ``pids`` raise at ``stage`` (an error reply)."""

    def mod(msg: Message, context: Context, call_next: Any) -> Message:
        if _stage(msg) == stage and _pid(context) in pids:
            raise RuntimeError(f"scripted dropout at {stage}")
        return call_next(msg, context)  # type: ignore[no-any-return]

    return mod


@pytest.mark.parametrize("stage", ["advertise", "share", "mask", "unmask"])
def test_dropouts_at_each_stage_down_to_the_threshold(
    make_grid: Any, tmp_path: Path, stage: str
) -> None:
    grid = make_grid(message_app(tmp_path, [dropping(stage, {1, 3})]), N)
    flow = SecAggWorkflow(N, 3, rounding="nearest")
    _, result = start(grid, flow)
    report = flow.reports[0]
    assert report.skipped is None
    assert report.dropped[stage] == (1002, 1004)
    # A node that drops at unmasking had sent its masked input: it is in the sum.
    inside = range(N) if stage == "unmask" else (0, 2, 4)
    assert_close_to(result.arrays, fedavg(inside), STEP / 2)


@pytest.mark.parametrize("stage", ["advertise", "share", "mask", "unmask"])
def test_below_the_threshold_the_round_is_skipped(
    make_grid: Any, tmp_path: Path, stage: str, caplog: pytest.LogCaptureFixture
) -> None:
    grid = make_grid(message_app(tmp_path, [dropping(stage, {0, 1, 2})]), N)
    flow = SecAggWorkflow(N, 3)
    with caplog.at_level(logging.WARNING, logger="privfed.flower"):
        strategy, result = start(grid, flow, rounds=2)
    assert strategy.seen == [[], []]  # no reply: nothing to aggregate
    assert len(result.arrays) == 0  # Flower's Result: no round produced arrays
    for name, array in initial().items():  # round 2 trained the initial model again
        np.testing.assert_array_equal(strategy.offered[1][name].numpy(), array.numpy())
    skipped = [
        r for r in caplog.records if r.name == "privfed.flower" and "skipped" in r.getMessage()
    ]
    assert len(skipped) == 2 and all("\n" not in r.getMessage() for r in skipped)
    assert flow.reports[0].skipped is not None


def test_legacy_round_below_the_threshold_leaves_the_model(make_grid: Any, tmp_path: Path) -> None:
    class Client(NumPyClient):
        def fit(self, parameters: list[np.ndarray], config: Any) -> Any:
            return [p + 1.0 for p in parameters], 3, {}

    app = ClientApp(
        client_fn=lambda context: Client().to_client(),
        mods=[dropping("mask", {0, 1, 2}), SecAggMod(journal=JournalIn(tmp_path))],
    )
    start_params = [np.zeros(4, np.float32)]
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        config=ServerConfig(num_rounds=1),
        strategy=LegacyFedAvg(
            fraction_evaluate=0.0, min_fit_clients=N, min_available_clients=N,
            initial_parameters=ndarrays_to_parameters(start_params),
        ),
    )  # fmt: skip
    DefaultWorkflow(fit_workflow=SecAggWorkflow(N, 3))(make_grid(app, N), context)
    final = context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()
    np.testing.assert_array_equal(final[0], start_params[0])
    assert context.history.metrics_distributed_fit == {}


def _npz() -> bytes:
    out = io.BytesIO()
    np.savez(out, values=np.arange(4, dtype=np.uint64))
    return out.getvalue()


def _huge_header() -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": "<u8", "fortran_order": False, "shape": (10**11,)}
    )
    return out.getvalue() + bytes(64)


def tampering(pid: int, how: str) -> Callable[..., Message]:
    """A mod around secagg_mod: partition ``pid`` alters its masked input."""

    def mod(msg: Message, context: Context, call_next: Any) -> Message:
        stage = _stage(msg)
        reply: Message = call_next(msg, context)
        if stage != "mask" or _pid(context) != pid:
            return reply
        header = reply.content.config_records[_wire.RECORD]
        values = reply.content.array_records[_wire.ARRAYS]
        raw = {"npz": _npz(), "empty": b"", "huge": _huge_header()}
        if how in raw:
            values["values"] = Array(
                dtype="uint64", shape=(4,), stype="numpy.ndarray", data=raw[how]
            )
        elif how == "short":
            values["values"] = Array(np.zeros(3, dtype=np.uint64))
        elif how == "forge":
            header["sender"] = 1 if int(header["sender"]) != 1 else 2  # type: ignore[arg-type]
        elif how == "structure":
            header[STRUCTURE_FIELD] = b'{"arrays": 7}'
        elif how == "no-structure":
            del header[STRUCTURE_FIELD]
        return reply

    return mod


@pytest.mark.parametrize(
    "how", ["npz", "empty", "huge", "short", "forge", "structure", "no-structure"]
)
def test_a_malformed_masked_input_is_a_dropout(make_grid: Any, tmp_path: Path, how: str) -> None:
    grid = make_grid(message_app(tmp_path, [tampering(2, how)]), N)
    flow = SecAggWorkflow(N, 3, rounding="nearest")
    _, result = start(grid, flow)
    report = flow.reports[0]
    assert report.dropped["mask"] == (1003,)
    assert 1003 in report.refused
    assert_close_to(result.arrays, fedavg([0, 1, 3, 4]), STEP / 2)


def garbling(pid: int, stage: str) -> Callable[..., Message]:
    """A mod around secagg_mod: partition ``pid`` replaces its protocol message by garbage."""

    def mod(msg: Message, context: Context, call_next: Any) -> Message:
        at = _stage(msg)
        reply: Message = call_next(msg, context)
        if at == stage and _pid(context) == pid:
            reply.content.config_records[_wire.RECORD]["message"] = b"\x01garbage" * 9
        return reply

    return mod


@pytest.mark.parametrize("stage", ["advertise", "share", "unmask"])
def test_a_garbage_reply_at_a_key_stage_is_a_dropout(
    make_grid: Any, tmp_path: Path, stage: str
) -> None:
    grid = make_grid(message_app(tmp_path, [garbling(1, stage)]), N)
    flow = SecAggWorkflow(N, 3, rounding="nearest")
    _, result = start(grid, flow)
    report = flow.reports[0]
    assert report.dropped[stage] == (1002,) and 1002 in report.refused
    inside = range(N) if stage == "unmask" else (0, 2, 3, 4)
    assert_close_to(result.arrays, fedavg(inside), STEP / 2)


def test_a_late_reply_is_a_dropout_and_is_ignored_when_it_arrives(
    make_grid: Any, tmp_path: Path
) -> None:
    grid = make_grid(message_app(tmp_path), N, withhold={"share": {4}, "mask": {0}})
    flow = SecAggWorkflow(N, 3, rounding="nearest")
    _, result = start(grid, flow)
    report = flow.reports[0]
    assert report.dropped["share"] == (1005,)
    assert report.dropped["mask"] == (1001,)
    assert_close_to(result.arrays, fedavg([1, 2, 3]), STEP / 2)


def test_a_reply_with_a_different_structure_is_refused(make_grid: Any, tmp_path: Path) -> None:
    """A node whose reply keeps its arrays in another record is not averaged with the others."""
    app = ClientApp(mods=[SecAggMod(journal=JournalIn(tmp_path))])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        content = reply_of(_pid(context), msg.content.array_records["arrays"])
        if _pid(context) == 4:
            content = RecordDict({"other": content["arrays"], "metrics": content["metrics"]})
        return Message(content, reply_to=msg)

    flow = SecAggWorkflow(N, 3, rounding="nearest")
    _, result = start(make_grid(app, N), flow)
    assert "majority" in flow.reports[0].refused[1005]
    assert_close_to(result.arrays, fedavg(range(4)), STEP / 2)


# -- configurations refused ------------------------------------------------------------


def test_a_configuration_that_could_wrap_is_refused_before_any_key(
    make_grid: Any, tmp_path: Path
) -> None:
    with pytest.raises(RingOverflowError):
        SecAggWorkflow(N, 3, max_weight=2.0**40, quantization_range=2**40)
    # Fine for two nodes (2 * 2**20 * 2**41 = 2**62), not for five.
    flow = SecAggWorkflow(N, 3, max_weight=2.0**20, quantization_range=2**42)
    grid = make_grid(message_app(tmp_path), N)
    with pytest.raises(RingOverflowError):
        start(grid, flow)
    assert grid.delivered == []


def test_a_node_refuses_an_encoding_that_could_wrap_before_making_keys(
    make_grid: Any, tmp_path: Path
) -> None:
    grid = make_grid(message_app(tmp_path), N)
    encoding = TrainingEncoding(
        arrays=(ArraySpec("w", (2,)),), max_weight=2.0**20, quantization_range=2**42
    )
    nonce, instructions = bytes(32), bytes(32)
    config = SecAggConfig(
        client_ids=tuple(range(1, N + 1)),
        threshold=3,
        vector_length=encoding.vector_length,
        session_id=training_session_id(nonce, encoding.to_bytes(), instructions),
    )
    record = ConfigRecord(
        {
            STAGE_FIELD: "advertise",
            "config": encode_config(config),
            ENCODING_FIELD: encoding.to_bytes(),
            NONCE_FIELD: nonce,
            INSTRUCTIONS_FIELD: instructions,
            "client-id": 1,
        }
    )
    message = Message(RecordDict({_wire.RECORD: record}), dst_node_id=1001, message_type="train")
    context = grid.contexts[1001]
    journals = tmp_path / "journals"
    mod = SecAggMod(journal=JournalIn(journals))
    with pytest.raises(RingOverflowError):
        mod(message, context, lambda m, c: pytest.fail("the handler must not run"))
    assert TRAIN_STATE_KEY not in context.state.config_records
    assert not journals.exists() or not any(journals.iterdir())


def test_non_float_arrays_and_bad_arguments_are_refused(make_grid: Any, tmp_path: Path) -> None:
    grid = make_grid(message_app(tmp_path), N)
    flow = SecAggWorkflow(N, 3)
    arrays = ArrayRecord({"counter": Array(np.zeros(2, dtype=np.int64))})
    with pytest.raises(ParameterError, match="float32 or float64"):
        RecordingFedAvg().start(grid=SecAggGrid(grid, flow), initial_arrays=arrays, num_rounds=1)
    assert grid.delivered == []
    bad_arguments: list[dict[str, Any]] = [
        {"num_shares": 2},
        {"num_shares": 0.0},
        {"reconstruction_threshold": 6},
        {"reconstruction_threshold": 1.5},
        {"timeout": 0.0},
        {"rounding": "up"},
        {"clipping_range": -1.0},
        {"quantization_range": 1},
        {"max_weight": 0.5},
    ]
    for bad in bad_arguments:
        kwargs: dict[str, Any] = {"num_shares": N, "reconstruction_threshold": 3, **bad}
        with pytest.raises(ParameterError):
            SecAggWorkflow(**kwargs)
    with pytest.raises(ParameterTypeError):
        SecAggGrid(grid, object())  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="LegacyContext"):
        flow(grid, grid.contexts[1001])


# -- the mod passes everything else through ----------------------------------------------


PLAIN_TRAIN = [
    ("train", RecordDict({"arrays": ArrayRecord({"w": Array(np.ones(2))})})),
    ("train.custom", RecordDict({"config": ConfigRecord({"lr": 0.1})})),
    ("train", RecordDict({_wire.RECORD: ConfigRecord({"message": b"not a stage"})})),
]


@pytest.mark.parametrize(("kind", "content"), PLAIN_TRAIN)
def test_a_plain_train_message_is_refused(make_grid: Any, kind: str, content: RecordDict) -> None:
    """A server that skips secure aggregation would get the node's update in the clear."""
    from privfed.errors import ProtocolAbort

    make_grid(ClientApp(), 1)  # sets Flower's task identity for Message()
    message = Message(content, dst_node_id=1001, message_type=kind)
    context = Context(run_id=1, node_id=1001, node_config={}, state=RecordDict(), run_config={})
    trained: list[Message] = []

    def handler(msg: Message, ctxt: Context) -> Message:
        trained.append(msg)
        return Message(RecordDict(), reply_to=msg)

    with pytest.raises(ProtocolAbort, match="plain train message is refused"):
        secagg_mod(message, context, handler)
    assert trained == []  # the handler never ran
    opted_out = SecAggMod(allow_plain_train=True)(message, context, handler)
    assert trained == [message] and not opted_out.has_error()


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("evaluate", RecordDict({_wire.RECORD: ConfigRecord({STAGE_FIELD: "advertise"})})),
        ("evaluate", RecordDict({"arrays": ArrayRecord({"w": Array(np.ones(2))})})),
        ("query.privfed_secagg_advertise", RecordDict()),
    ],
)
def test_other_messages_pass_through_untouched(
    make_grid: Any, kind: str, content: RecordDict
) -> None:
    make_grid(ClientApp(), 1)  # sets Flower's task identity for Message()
    message = Message(content, dst_node_id=1001, message_type=kind)
    context = Context(run_id=1, node_id=1001, node_config={}, state=RecordDict(), run_config={})
    answer = Message(RecordDict(), reply_to=message)
    seen: list[Message] = []

    def handler(msg: Message, ctxt: Context) -> Message:
        seen.append(msg)
        return answer

    assert secagg_mod(message, context, handler) is answer
    assert seen == [message] and seen[0] is message
    assert seen[0].content is content and list(content.keys()) == list(seen[0].content.keys())
    assert not context.state.config_records


# -- fresh keys, and no plaintext on the server ---------------------------------------------


def test_fresh_keys_every_round(make_grid: Any, tmp_path: Path) -> None:
    grid = make_grid(message_app(tmp_path), N)
    start(grid, SecAggWorkflow(N, 3), rounds=2)
    keys: dict[int, list[bytes]] = {}
    for reply in grid.delivered:
        data = reply.content.config_records[_wire.RECORD].get("message")
        if isinstance(data, bytes):
            message = decode_message(data)
            if isinstance(message, AdvertiseKeys):
                keys.setdefault(reply.metadata.src_node_id, []).append(message.mask_public_key)
    assert sorted(keys) == sorted(grid.contexts)
    assert all(len(k) == 2 and k[0] != k[1] for k in keys.values())


def _reachable(
    roots: Iterable[object], stop: tuple[type, ...]
) -> tuple[list[np.ndarray], list[bytes]]:
    """Every numpy array and bytes object reachable from ``roots`` (not through ``stop`` types)."""
    arrays: list[np.ndarray] = []
    blobs: list[bytes] = []
    seen: set[int] = set()
    stack = list(roots)
    atoms = (str, int, float, complex, bool, type(None), type, types.ModuleType)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (*atoms, *stop)):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            arrays.append(obj)
            continue
        if isinstance(obj, (bytes, bytearray, memoryview)):
            blobs.append(bytes(obj))
            continue
        if isinstance(obj, Mapping):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        if callable(obj) and hasattr(obj, "__closure__"):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if c.cell_contents)
        stack.extend(getattr(obj, "__dict__", {}).values())
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                stack.append(getattr(obj, slot))
    return arrays, blobs


def test_the_server_never_holds_a_nodes_unmasked_update(make_grid: Any, tmp_path: Path) -> None:
    layout = array_layout(RecordDict({"arrays": initial()}))
    flow_args: dict[str, Any] = {
        "num_shares": N,
        "reconstruction_threshold": 3,
        "rounding": "nearest",
    }
    encoding = SecAggWorkflow(**flow_args).encoding(layout)
    secrets_: list[np.ndarray] = []
    for pid in range(N):
        reply = reply_of(pid, initial())
        secrets_.append(encoding.encode(reply)[0])  # the node's ring vector (deterministic)
        secrets_.extend(
            reply.array_records["arrays"][name].numpy() for name in SHAPES
        )  # its new arrays
        secrets_.extend(deltas(pid).values())  # its update

    grid = make_grid(message_app(tmp_path), N)
    grid_type = type(grid).__mro__[1]  # the LoopbackGrid: the nodes' side, not walked

    def holds_a_secret(roots: Iterable[object]) -> bool:
        arrays, blobs = _reachable(roots, stop=(grid_type,))
        for secret in secrets_:
            raw = secret.tobytes()
            if any(a.shape == secret.shape and np.array_equal(a, secret) for a in arrays):
                return True
            if any(raw in blob for blob in blobs):
                return True
        return False

    # The walker finds a secret where one is.
    assert holds_a_secret([{"hidden": [types.SimpleNamespace(x=secrets_[0].copy())]}])
    assert holds_a_secret([[ArrayRecord({"w": Array(secrets_[1])})]])

    checked: list[str] = []

    class Watched(SecAggWorkflow):
        def _watch(self, name: str, done: bool, grid: Any, state: Any) -> bool:
            assert not holds_a_secret([self, state, state.server, grid, list(grid.delivered)])
            checked.append(name)
            return done

        def setup_stage(self, grid: Any, state: Any) -> bool:
            return self._watch("setup", super().setup_stage(grid, state), grid, state)

        def share_keys_stage(self, grid: Any, state: Any) -> bool:
            return self._watch("share", super().share_keys_stage(grid, state), grid, state)

        def collect_masked_vectors_stage(self, grid: Any, state: Any) -> bool:
            done = super().collect_masked_vectors_stage(grid, state)
            return self._watch("mask", done, grid, state)

        def unmask_stage(self, grid: Any, state: Any) -> bool:
            return self._watch("unmask", super().unmask_stage(grid, state), grid, state)

    flow = Watched(**flow_args)
    strategy, result = start(grid, flow)
    assert checked == ["setup", "share", "mask", "unmask"]
    assert not holds_a_secret([flow, strategy, result, list(grid.delivered)])


def _rewriting(grid: Any, stage: str, node: int, rewrite: Any) -> Any:
    """``grid``, with a lying server rewriting one node's message of one stage."""
    send = grid.send_and_receive

    def send_and_receive(messages: Any, *, timeout: float | None = None) -> Any:
        out = []
        for message in messages:
            if _stage(message) == stage and message.metadata.dst_node_id == node:
                message = Message(
                    rewrite(message.content),
                    dst_node_id=node,
                    message_type=message.metadata.message_type,
                    group_id=message.metadata.group_id,
                )
            out.append(message)
        return send(out, timeout=timeout)

    grid.send_and_receive = send_and_receive
    return grid


def _other_ranges(content: RecordDict) -> RecordDict:
    """The isolation attack: huge clipping range and weight 1 for every node but one."""
    record = dict(content.config_records[_wire.RECORD])
    fields = json.loads(record[ENCODING_FIELD])
    fields.update({"clipping_range": 1e300, "max_weight": 1.0})
    record[ENCODING_FIELD] = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return RecordDict({**dict(content), _wire.RECORD: ConfigRecord(record)})


def _other_model(content: RecordDict) -> RecordDict:
    arrays = content.array_records["arrays"]
    changed = {k: Array(np.zeros_like(a.numpy())) for k, a in arrays.items()}
    return RecordDict({**dict(content), "arrays": ArrayRecord(changed)})


@pytest.mark.parametrize(
    ("stage", "rewrite", "why"),
    [
        ("advertise", _other_ranges, "does not commit to its encoding"),
        ("mask", _other_model, "not the ones the round's session commits to"),
    ],
)
def test_a_server_cannot_give_one_node_other_ranges_or_another_model(
    make_grid: Any, tmp_path: Path, stage: str, rewrite: Any, why: str
) -> None:
    """The session id commits to the encoding and the instructions (isolation attacks)."""
    grid = make_grid(message_app(tmp_path), N)
    flow = SecAggWorkflow(N, 3)
    start(_rewriting(grid, stage, 1002, rewrite), flow)
    (report,) = flow.reports
    assert 2 not in report.survivors  # node 1002 (client 2) refused the round
    errors = [m.error.reason for m in grid.delivered if m.has_error()]
    assert any(why in reason for reason in errors), errors


def test_nodes_with_different_instructions_are_refused_by_the_server(
    make_grid: Any, tmp_path: Path
) -> None:
    grid = make_grid(message_app(tmp_path), N)
    flow = SecAggWorkflow(N, 3)
    first, second = (
        RecordDict({"arrays": initial(), "config": ConfigRecord({"lr": lr})}) for lr in (0.1, 0.2)
    )
    state = TrainingRoundState(
        round_index=1,
        instructions={1001: first, 1002: second, 1003: first},
        timeout=1.0,
        group_id="1",
    )
    with pytest.raises(ParameterError, match="the same train instructions"):
        flow.setup_stage(grid, state)


def test_a_node_contributes_once_per_round_of_a_run(make_grid: Any, tmp_path: Path) -> None:
    """Two sessions of one round would let a server difference two sums (one node's update)."""
    grid = make_grid(message_app(tmp_path), N)
    first = SecAggWorkflow(N, 3)
    start(grid, first)
    assert len(first.reports[0].survivors) == N
    again = SecAggWorkflow(N, 3)
    start(grid, again)  # the same run (Context.run_id), round 1 again
    (report,) = again.reports
    assert report.survivors == ()
    errors = [m.error.reason for m in grid.delivered if m.has_error()]
    assert sum("already trained for round 1" in reason for reason in errors) == N


def test_the_journal_knows_a_session_under_any_client_id() -> None:
    from privfed.secagg.protocol.state import JournalEntry, MemoryRevealJournal

    journal = MemoryRevealJournal()
    session = bytes(range(32))
    assert not journal.knows_session(session)
    journal.record(JournalEntry(session_id=session, round_index=3, client_id=7, step=1))
    assert journal.knows_session(session) and not journal.knows_session(bytes(32))


def _liar(kind: str) -> Any:
    """A node's Mod that rewrites its own encoding before it masks (no range proofs)."""

    def mod(msg: Message, ctxt: Context, call_next: Any) -> Message:
        if _stage(msg) == "advertise" and int(ctxt.node_config["partition-id"]) == 0:
            # Its stored copy is what it encodes with; the server's copy is unchanged.
            reply = call_next(msg, ctxt)
            from privfed.flower.mod import _ENCODING_KEY

            record = dict(ctxt.state.config_records[_ENCODING_KEY])
            fields = json.loads(record["encoding"])
            if kind == "range":
                fields["quantization_range"] = 2**40
            else:
                fields["max_weight"] = 10.0**9
            record["encoding"] = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
            ctxt.state[_ENCODING_KEY] = ConfigRecord(record)
            return reply
        return call_next(msg, ctxt)

    return mod


@pytest.mark.parametrize("kind", ["range", "weight"])
def test_a_sum_outside_the_encodings_range_is_not_applied(
    make_grid: Any, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One node encoding beyond its clip (or weight cap) cannot move the model anywhere."""
    if kind == "weight":  # node 0 reports 10**8 examples and lifts its own cap
        monkeypatch.setattr(sys.modules[__name__], "WEIGHTS", (10**8, *WEIGHTS[1:]))
    grid = make_grid(message_app(tmp_path, mods=[_liar(kind)]), N)
    flow = SecAggWorkflow(N, 3)
    _, result = start(grid, flow)
    (report,) = flow.reports
    assert report.skipped and "outside" in report.skipped, report
    for name, array in result.arrays.items():  # the model is the initial one
        np.testing.assert_array_equal(array.numpy(), initial()[name].numpy())


def test_a_structure_whose_record_names_overlap_is_malformed() -> None:
    """Arrays and metrics under one record name could not be handed to the strategy."""
    from privfed.errors import MessageFormatError
    from privfed.flower._training_wire import Structure

    encoding = TrainingEncoding(arrays=(ArraySpec("w", (2,)),))
    good = {"arrays": [["arrays", "float32"]], "metrics": [], "weight": ["metrics", "num-examples"]}
    Structure.from_bytes(json.dumps(good).encode(), encoding)
    for bad in (
        {**good, "weight": ["arrays", "num-examples"]},
        {**good, "metrics": [["arrays", "loss"]]},
        {**good, "metrics": [["metrics", "num-examples"]]},
    ):
        with pytest.raises(MessageFormatError, match="overlap"):
            Structure.from_bytes(json.dumps(bad).encode(), encoding)
