"""Distributed-DP training through each Flower entry point, and the refusals before any round.

Entry points: a legacy strategy (``flwr.server.strategy.FedAvg``) in
``DefaultWorkflow(fit_workflow=SecAggWorkflow(privacy=...))`` and a Message-API
``FedAvg`` through ``SecAggGrid``.  Statistical checks state their false-failure
rate; the nodes' noise comes from the OS CSPRNG (as in production).
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.client import NumPyClient
from flwr.clientapp import ClientApp
from flwr.common import ndarrays_to_parameters
from flwr.server import ServerConfig
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg as LegacyFedAvg
from flwr.server.workflow import DefaultWorkflow
from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
from flwr.serverapp.strategy import FedAvg

from privfed.dp.adaptive_clipping import AdaptiveClipping
from privfed.errors import CalibrationError, ParameterError, RingOverflowError
from privfed.flower import DistributedDP, NodePolicy, SecAggGrid, SecAggMod, SecAggWorkflow
from privfed.flower.client import JournalIn

N, T = 5, 3
SHAPE = (40, 50)
CLIP = 1.0


def delta(pid: int, round_index: int) -> np.ndarray:
    out = np.random.default_rng(100 * round_index + pid).normal(0.0, 0.01, SHAPE)
    if pid == 0:
        out *= 1000.0  # norm ~ 10 > CLIP: clipped
    return out.astype(np.float32)


def clipped(x: np.ndarray, clip: float = CLIP) -> np.ndarray:
    x = x.astype(np.float64)
    return x * min(1.0, clip / float(np.linalg.norm(x)))


@pytest.fixture
def make_grid(loopback: type) -> Any:
    class Grid(loopback):  # type: ignore[misc]
        @property
        def run(self) -> Any:
            return types.SimpleNamespace(run_id=1)

    return Grid


def message_app(tmp_path: Path, policy: NodePolicy | None = None) -> ClientApp:
    client = ClientApp(mods=[_mod(tmp_path, policy)])

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        rnd = int(str(msg.content.config_records["config"]["server-round"]))
        base = msg.content.array_records["arrays"]["w"].numpy()
        new = ArrayRecord({"w": Array((base + delta(pid, rnd)).astype(np.float32))})
        metrics = MetricRecord({"num-examples": 10 + pid})
        return Message(RecordDict({"arrays": new, "metrics": metrics}), reply_to=msg)

    return client


def legacy_app(tmp_path: Path, policy: NodePolicy | None = None) -> ClientApp:
    class Client(NumPyClient):
        def __init__(self, pid: int) -> None:
            self.pid, self.round = pid, 0

        def fit(self, parameters: list[np.ndarray], config: Any) -> Any:
            rnd = int(config.get("server-round", 1)) if config else 1
            return [parameters[0] + delta(self.pid, rnd)], 10 + self.pid, {"loss": 1.0}

        def evaluate(self, parameters: list[np.ndarray], config: Any) -> Any:
            return 0.0, 10, {}

    def client_fn(context: Context) -> Any:
        return Client(int(context.node_config["partition-id"])).to_client()

    return ClientApp(client_fn=client_fn, mods=[_mod(tmp_path, policy)])


def _mod(tmp_path: Path, policy: NodePolicy | None) -> SecAggMod:
    return SecAggMod(
        journal=JournalIn(tmp_path / "journals"),
        policy=None if policy is None else (lambda _: policy),
    )


def privacy(tmp_path: Path, **overrides: Any) -> DistributedDP:
    args: dict[str, Any] = {
        "rounds": 2, "clip_norm": CLIP, "num_clients": N, "output_dir": tmp_path / "out",
    }  # fmt: skip
    args.update(overrides)
    return DistributedDP(8.0, 1e-5, **args)


def run_legacy(grid: Any, flow: SecAggWorkflow, rounds: int) -> tuple[list[Any], LegacyContext]:
    """DefaultWorkflow + legacy FedAvg; returns what aggregate_fit saw per round."""
    received: list[Any] = []

    class Recording(LegacyFedAvg):
        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            received.append(list(results))
            return super().aggregate_fit(server_round, results, failures)

    strategy = Recording(
        min_fit_clients=N, min_available_clients=N, fraction_evaluate=0.0,
        initial_parameters=ndarrays_to_parameters([np.zeros(SHAPE, np.float32)]),
    )  # fmt: skip
    context = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        config=ServerConfig(num_rounds=rounds),
        strategy=strategy,
    )
    DefaultWorkflow(fit_workflow=flow)(grid, context)
    return received, context


def run_message(grid: Any, flow: SecAggWorkflow, rounds: int) -> tuple[list[Any], Any]:
    """SecAggGrid + Message-API FedAvg; returns what aggregate_train saw per round."""
    received: list[Any] = []

    class Recording(FedAvg):
        def aggregate_train(self, server_round: int, replies: Any) -> Any:
            replies = list(replies)
            received.append(replies)
            return super().aggregate_train(server_round, replies)

    strategy = Recording(fraction_evaluate=0.0, min_train_nodes=N, min_available_nodes=N)
    init = ArrayRecord({"w": Array(np.zeros(SHAPE, np.float32))})
    result = strategy.start(grid=SecAggGrid(grid, flow), initial_arrays=init, num_rounds=rounds)
    return received, result


def test_dp_through_a_legacy_strategy_in_default_workflow(make_grid: Any, tmp_path: Path) -> None:
    dp = privacy(tmp_path, rounds=1)
    flow = SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=dp)
    received, context = run_legacy(make_grid(legacy_app(tmp_path), N), flow, rounds=1)
    # The strategy saw one FitRes: the survivors' count, no node's example count or metric.
    [[(_, fitres)]] = received
    assert fitres.num_examples == N and dict(fitres.metrics) == {}
    final = context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()[0]
    exact = np.mean([clipped(delta(p, 1)) for p in range(N)], axis=0)
    std = dp.plan.delivered_std(N) / N  # type: ignore[union-attr]
    # 2000 coordinates: the sample std is within 10 % of std with probability > 1 - 1e-5.
    assert abs((final.astype(np.float64) - exact).std() / std - 1.0) < 0.1
    ledger = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert len(ledger["releases"]) == 1


def test_adaptive_clipping_through_the_workflow(make_grid: Any, tmp_path: Path) -> None:
    settings = AdaptiveClipping(target_quantile=0.5, learning_rate=0.2, count_noise_std=1.0)
    dp = privacy(tmp_path, adaptive_clipping=settings)
    flow = SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=dp)
    received, result = run_message(make_grid(message_app(tmp_path), N), flow, rounds=2)
    assert [len(r) for r in received] == [1, 1]
    document = json.loads((tmp_path / "out" / "dp_training.json").read_text())
    first, second = document["rounds"]
    # Round 1 ran at the configured clip; round 2's clip is the paper's step from round 1's
    # noisy fraction; the clip after round 2 is the next step.
    assert first["clip_norm"] == CLIP
    step = math.exp(-0.2 * (min(1.0, max(0.0, first["noisy_fraction_under_clip"])) - 0.5))
    assert second["clip_norm"] == pytest.approx(CLIP * step, rel=1e-12)
    assert dp.clip_scale > 0.0 and dp.plan is not None and dp.plan.count_noise > 0
    # The ledger charges the update and the count of each round.
    ledger = json.loads((tmp_path / "out" / "ledger.json").read_text())
    names = [r["name"] for r in ledger["releases"]]
    assert names == ["training-round-1", "training-round-1-clip-count",
                     "training-round-2", "training-round-2-clip-count"]  # fmt: skip
    assert document["epsilon_spent"] <= 8.0
    # The model moved by two noisy means of clipped updates (the clip of each round).
    clips = [first["clip_norm"], second["clip_norm"]]
    exact = sum(
        np.mean([clipped(delta(p, r), clips[r - 1]) for p in range(N)], axis=0) for r in (1, 2)
    )
    final = result.arrays["w"].numpy().astype(np.float64)
    std = math.sqrt(sum((dp.plan.delivered_std(N) * c / CLIP / N) ** 2 for c in clips))
    # As above: within 10 % with probability > 1 - 1e-5.
    assert abs((final - exact).std() / std - 1.0) < 0.1


ENTRY_POINTS: dict[str, Callable[..., Any]] = {"default-workflow": run_legacy, "grid": run_message}
APPS: dict[str, Callable[..., ClientApp]] = {"default-workflow": legacy_app, "grid": message_app}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_node_pinning_epsilon_refuses_a_weaker_plan(
    make_grid: Any, tmp_path: Path, entry: str
) -> None:
    strict = NodePolicy(dp_max_epsilon=1.0)
    dp = privacy(tmp_path, rounds=1)
    flow = SecAggWorkflow(num_shares=N, reconstruction_threshold=T, privacy=dp)
    received, _ = ENTRY_POINTS[entry](make_grid(APPS[entry](tmp_path, strict), N), flow, 1)
    assert flow.reports[0].skipped is not None  # every node refused at advertise
    assert all(not replies for replies in received)  # nothing reached the strategy
    assert dp.rounds_run == [] and len(dp.ledger.releases) == 0  # nothing charged


BAD: list[tuple[dict[str, Any], dict[str, Any], type[Exception], str]] = [
    ({"clip_norm": 0.0}, {}, ParameterError, "clip_norm"),
    ({"clip_norm": -1.0}, {}, ParameterError, "clip_norm"),
    ({"ring_bits": 8, "model_size": 10**5}, {}, RingOverflowError, "ring_bits"),
    ({"rounds": 10**6, "ring_bits": 24, "model_size": 2000}, {}, CalibrationError, "epsilon"),
    ({}, {"corrupted": 3}, ParameterError, "corrupted"),  # t - n_C < 1
    ({"adaptive_clipping": AdaptiveClipping(count_noise_std=0.05)}, {}, ParameterError, "count"),
    ({"adaptive_clipping": 0.5}, {}, TypeError, "adaptive_clipping"),
]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(("dp_args", "flow_args", "error", "name"), BAD)
def test_every_bad_configuration_is_one_error_before_any_round(
    make_grid: Any, tmp_path: Path, entry: str, dp_args: dict[str, Any],
    flow_args: dict[str, Any], error: type[Exception], name: str,
) -> None:  # fmt: skip
    grid = make_grid(APPS[entry](tmp_path), N)
    with pytest.raises(error, match=name):
        dp = privacy(tmp_path, **dp_args)
        flow = SecAggWorkflow(
            num_shares=N, reconstruction_threshold=T, privacy=dp, **flow_args
        )
        ENTRY_POINTS[entry](grid, flow, 1)
    assert not grid.delivered  # no node ever got a message


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"target_quantile": 0.0}, "target_quantile"),
        ({"target_quantile": 1.5}, "target_quantile"),
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"count_noise_std": -1.0}, "count_noise_std"),
    ],
)
def test_adaptive_clipping_parameters_out_of_range(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        AdaptiveClipping(**kwargs)
