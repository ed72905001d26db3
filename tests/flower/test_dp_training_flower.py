"""Distributed DP training over Flower (in-process Grid): the server never sees a clean sum.

Statistical checks use fixed data and state their false-failure rate; the
noise itself comes from the OS CSPRNG (as in production).
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from privfed.dp.training import plan_training_noise
from privfed.errors import CalibrationError, ParameterError, RingOverflowError
from privfed.flower import DistributedDP, NodePolicy, SecAggGrid, SecAggMod, SecAggWorkflow, _wire
from privfed.flower._training_wire import STAGE_FIELD
from privfed.flower.client import JournalIn

N, T = 5, 3
SHAPE = (40, 50)
CLIP = 1.0


@pytest.fixture
def make_grid(loopback: type) -> Any:
    """``make_grid(app, n, withhold={stage: pids})``: a loopback grid dropping those replies."""

    class Grid(loopback):  # type: ignore[misc,valid-type]
        def __init__(self, client: ClientApp, n: int, withhold: Any = None) -> None:
            super().__init__(client, n)
            self.withhold = dict(withhold or {})

        @property
        def run(self) -> Any:
            return types.SimpleNamespace(run_id=1)

        def send_and_receive(self, messages: Iterable[Message], *, timeout: Any = None) -> Any:
            batch = list(messages)
            replies = list(super().send_and_receive(batch, timeout=timeout))
            kept = []
            for sent, reply in zip(batch, replies, strict=True):
                content = sent.content if sent.has_content() else RecordDict()
                record = content.config_records.get(_wire.RECORD)
                stage = None if record is None else record.get(STAGE_FIELD)
                pid = int(self.contexts[sent.metadata.dst_node_id].node_config["partition-id"])
                if pid not in self.withhold.get(stage, set()):
                    kept.append(reply)
            return kept

    return Grid


def delta(pid: int, round_index: int) -> np.ndarray:
    rng = np.random.default_rng(100 * round_index + pid)
    out = rng.normal(0.0, 0.01, SHAPE)
    if pid == 0:
        out *= 1000.0  # norm ~ 10 > CLIP: clipped
    return out.astype(np.float32)


def clipped(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    norm = float(np.linalg.norm(x))
    return x * min(1.0, CLIP / norm)


def app(tmp_path: Path, policy: NodePolicy | None = None) -> ClientApp:
    mod = SecAggMod(
        journal=JournalIn(tmp_path / "journals"),
        policy=None if policy is None else (lambda _: policy),
    )
    client = ClientApp(mods=[mod])

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        rnd = int(msg.content.config_records["config"]["server-round"])
        base = msg.content.array_records["arrays"]["w"].numpy()
        new = ArrayRecord({"w": Array((base + delta(pid, rnd)).astype(np.float32))})
        metrics = MetricRecord({"num-examples": 10 + pid, "loss": float(pid)})
        return Message(RecordDict({"arrays": new, "metrics": metrics}), reply_to=msg)

    return client


def privacy(tmp_path: Path, **overrides: Any) -> DistributedDP:
    args: dict[str, Any] = {
        "rounds": 2, "clip_norm": CLIP, "num_clients": N, "output_dir": tmp_path / "out",
    }  # fmt: skip
    args.update(overrides)
    return DistributedDP(8.0, 1e-5, **args)


class Recording(FedAvg):
    def __init__(self) -> None:
        super().__init__(fraction_evaluate=0.0, min_train_nodes=N, min_available_nodes=N)
        self.seen: list[list[Message]] = []

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> Any:
        replies = list(replies)
        self.seen.append(replies)
        return super().aggregate_train(server_round, replies)


def arrays_in(roots: Iterable[object]) -> list[np.ndarray]:
    """Every numpy array (and flwr Array, decoded) reachable from ``roots``."""
    out: list[np.ndarray] = []
    seen: set[int] = set()
    stack = list(roots)
    atoms = (str, bytes, int, float, bool, type(None), type, types.ModuleType)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, atoms):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            out.append(obj)
            continue
        if isinstance(obj, Array):
            out.append(obj.numpy())
            continue
        if isinstance(obj, Mapping):
            stack.extend(obj.values())
        if isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        stack.extend(getattr(obj, "__dict__", {}).values())
    return out


@pytest.mark.parametrize("mechanism", ["skellam", "discrete-gaussian"])
def test_dp_rounds_deliver_a_noisy_mean_and_no_clean_sum_exists(
    make_grid: Any, tmp_path: Path, mechanism: str
) -> None:
    dp = privacy(tmp_path, mechanism=mechanism)
    flow = SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=dp)
    grid = make_grid(app(tmp_path), N, withhold={"mask": {4}})  # node 4 drops out each round
    strategy = Recording()
    init = ArrayRecord({"w": Array(np.zeros(SHAPE, np.float32))})
    result = strategy.start(grid=SecAggGrid(grid, flow), initial_arrays=init, num_rounds=3)
    reports = flow.reports
    assert [len(r.survivors) for r in reports[:2]] == [4, 4]
    assert reports[2].skipped is not None and "2 rounds" in reports[2].skipped  # budget: R = 2
    # The strategy got one reply per round: the survivor count, no node's count or metric.
    assert [len(replies) for replies in strategy.seen] == [1, 1, 0]
    for replies in strategy.seen[:2]:
        (reply,) = replies
        assert dict(reply.content.metric_records["metrics"]) == {"num-examples": 4}
    # The final model: two noisy means of the four survivors' clipped updates.
    exact = sum(np.mean([clipped(delta(p, r)) for p in range(4)], axis=0) for r in (1, 2))
    final = result.arrays["w"].numpy().astype(np.float64)
    std = math.sqrt(2) * dp.plan.delivered_std(4) / 4  # type: ignore[union-attr]
    # 2000 coordinates: the sample std is within 10 % of std with probability > 1 - 1e-5.
    assert abs((final - exact).std() / std - 1.0) < 0.1
    # No server object holds an array close to a clean sum or mean (of either round).
    cleans = [
        sum(clipped(delta(p, r)) for p in range(4)) * scale for r in (1, 2) for scale in (1, 0.25)
    ] + [exact]
    held = arrays_in([flow, strategy, result, grid.delivered, dp])
    assert held  # the walker sees the server's arrays
    for array in held:
        for clean in cleans:
            if array.size == clean.size:
                close = np.abs(array.reshape(-1).astype(np.float64) - clean.reshape(-1))
                assert close.max() > 0.5 * std, "a noiseless aggregate is held by the server"
    # One ledger per run, written after every round, and its trust statement.
    ledger_text = (tmp_path / "out" / "ledger.json").read_text()
    assert ledger_text.startswith("{\n  ")  # indented for a reader (issue #27)
    ledger = json.loads(ledger_text)
    assert len(ledger["releases"]) == 2
    document = json.loads((tmp_path / "out" / "dp_training.json").read_text())
    assert document["epsilon_spent"] <= 8.0 and "n_min = t - n_C" in document["plan"]["trust"]
    assert document["plan"]["log_wrap_probability_per_round"] < math.log(2.0**-40)
    assert len(document["rounds"]) == 2


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ({"clip_norm": 0.0}, ParameterError, "clip_norm"),
        ({"ring_bits": 8, "model_size": 10**5}, RingOverflowError, "ring_bits"),
        ({"rounds": 10**6, "ring_bits": 24, "model_size": 2000}, CalibrationError, "epsilon"),
    ],
)
def test_a_bad_configuration_is_one_error_before_any_round(
    tmp_path: Path, args: dict[str, Any], error: type[Exception], name: str
) -> None:
    with pytest.raises(error, match=name):
        SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=privacy(tmp_path, **args))
    with pytest.raises(ParameterError, match="corrupted"):  # t - n_C < 1
        SecAggWorkflow(
            num_shares=N, reconstruction_threshold=T, corrupted=3, privacy=privacy(tmp_path)
        )


def test_a_node_pinning_epsilon_refuses_a_weaker_plan_and_a_plain_round(
    make_grid: Any, tmp_path: Path
) -> None:
    strict = NodePolicy(dp_max_epsilon=1.0)
    init = ArrayRecord({"w": Array(np.zeros(SHAPE, np.float32))})
    for flow in (
        SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=privacy(tmp_path)),
        SecAggWorkflow(num_shares=N, reconstruction_threshold=T),
    ):
        grid = make_grid(app(tmp_path, strict), N)
        strategy = Recording()
        strategy.start(grid=SecAggGrid(grid, flow), initial_arrays=init, num_rounds=1)
        assert flow.reports[0].skipped is not None  # every node refused at advertise
        assert strategy.seen == [[]]  # nothing reached the strategy
    assert NodePolicy.from_node_config({"privfed-dp-max-epsilon": 2.5}).dp_max_epsilon == 2.5


def test_the_plan_the_workflow_makes_is_the_core_plan(tmp_path: Path) -> None:
    dp = privacy(tmp_path, model_size=2000)
    SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=dp)
    assert dp.plan == plan_training_noise(
        8.0, 1e-5, rounds=2, clip_norm=CLIP, model_size=2000, num_clients=N, threshold=T
    )
