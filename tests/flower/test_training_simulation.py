"""Flower training with privfed's secure aggregation in the simulation engine (Ray).

A Flower app in the shape of ``examples/flower-secure-aggregation``: a
``NumPyClient`` (here a 3-feature linear regression trained by a few steps of
gradient descent on local data) in a ``ClientApp`` with ``mods=[secagg_mod]``,
and ``DefaultWorkflow(fit_workflow=SecAggWorkflow(...))`` with legacy
FedAvg on the server; 4 virtual nodes, 2 rounds, one node dropping out at
SHARE_KEYS in round 2.

Bound: with nearest rounding each round's aggregate is FedAvg's weighted mean
within half a grid step ``2c / Q`` per coordinate; gradient descent with this
step size is a contraction, so after two rounds the model is within one step
(plus float32 rounding) of plain FedAvg run on the same clients in process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

N = 4
ROUNDS = 2
STEP = 2 * 8.0 / 2**22
DROP = (2, 3)  # (round, partition) raising at SHARE_KEYS


def local_data(pid: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    rng = np.random.default_rng(pid)
    x = rng.normal(size=(20 + 10 * pid, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.1 * rng.normal(size=x.shape[0])
    return x, y


def local_fit(pid: int, params: list[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
    """Five full-batch gradient steps on the node's data (a contraction: lr * 2 * L < 2)."""
    x, y = local_data(pid)
    w, b = params[0].astype(np.float64), float(params[1][0])
    for _ in range(5):
        residual = x @ w + b - y
        w = w - 0.05 * 2 * x.T @ residual / len(y)
        b = b - 0.05 * 2 * residual.mean()
    return [w.astype(np.float32), np.array([b], dtype=np.float32)]


def client_app(journals: Path) -> Any:
    from flwr.app import ConfigRecord, Context, Message
    from flwr.client import NumPyClient
    from flwr.clientapp import ClientApp

    from privfed.flower import SecAggMod
    from privfed.flower.client import JournalIn

    class LinearClient(NumPyClient):
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def fit(self, parameters: list[Any], config: Any) -> Any:
            new = local_fit(self.pid, parameters)
            return new, len(local_data(self.pid)[1]), {"train_metric": 1.0}

    def client_fn(context: Context) -> Any:
        return LinearClient(int(context.node_config["partition-id"])).to_client()

    def drop(msg: Message, context: Context, call_next: Any) -> Message:
        """Partition DROP[1] raises at the SHARE_KEYS stage of round DROP[0]."""
        record = msg.content.config_records.get("privfed") if msg.has_content() else None
        if record is not None and record.get("train-stage") == "share":
            counter = context.state.config_records.get("test-rounds", ConfigRecord({"n": 0}))
            seen = int(counter["n"]) + 1  # type: ignore[arg-type]
            context.state["test-rounds"] = ConfigRecord({"n": seen})
            if (seen, int(context.node_config["partition-id"])) == DROP:
                raise RuntimeError("scripted dropout at share")
        return call_next(msg, context)  # type: ignore[no-any-return]

    return ClientApp(client_fn=client_fn, mods=[drop, SecAggMod(journal=JournalIn(journals))])


def server_app(out: dict[str, Any]) -> Any:
    from flwr.app import Context
    from flwr.common import ndarrays_to_parameters
    from flwr.server import ServerConfig
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow
    from flwr.server.workflow.constant import MAIN_PARAMS_RECORD
    from flwr.serverapp import Grid, ServerApp

    from privfed.flower import SecAggWorkflow

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        start = [np.zeros(3, np.float32), np.zeros(1, np.float32)]
        strategy = FedAvg(
            fraction_evaluate=0.0,
            min_fit_clients=N,
            min_available_clients=N,
            initial_parameters=ndarrays_to_parameters(start),
        )
        legacy = LegacyContext(context, config=ServerConfig(num_rounds=ROUNDS), strategy=strategy)
        flow = SecAggWorkflow(
            num_shares=N, reconstruction_threshold=3, rounding="nearest", timeout=60.0
        )
        DefaultWorkflow(fit_workflow=flow)(grid, legacy)
        out["params"] = legacy.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()
        out["reports"] = list(flow.reports)

    return app


def plain_fedavg() -> list[npt.NDArray[np.float64]]:
    params = [np.zeros(3, np.float32), np.zeros(1, np.float32)]
    for r in range(1, ROUNDS + 1):
        pids = [p for p in range(N) if (r, p) != DROP]
        weights = np.array([len(local_data(p)[1]) for p in pids], dtype=np.float64)
        updates = [local_fit(p, params) for p in pids]
        mean = [
            sum(w * u[i].astype(np.float64) for w, u in zip(weights, updates, strict=True))
            / weights.sum()
            for i in range(2)
        ]
        params = [m.astype(np.float32) for m in mean]
    return [p.astype(np.float64) for p in params]


@pytest.mark.slow
def test_legacy_training_with_secagg_mod_in_the_simulation_engine(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import ray.cloudpickle

    from privfed.flower import run_simulation

    # The ClientApp's functions live in this test module: ship them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    out: dict[str, Any] = {}
    run_simulation(
        server_app(out),
        client_app(tmp_path / "journals"),
        num_supernodes=N,
        num_cpus=2,
        client_cpus=1.0,
    )
    reports = out["reports"]
    assert [r.skipped for r in reports] == [None, None]
    assert all(not any(nodes) for nodes in reports[0].dropped.values())
    assert len(reports[1].dropped["share"]) == 1 and len(reports[1].survivors) == N - 1
    expected = plain_fedavg()
    for got, want in zip(out["params"], expected, strict=True):
        assert got.dtype == np.float32
        assert np.all(np.abs(got - want) <= STEP + 2.0**-23 * np.abs(want)), (got, want)
    # Training moved the model far beyond the bound: the comparison is not vacuous.
    assert np.abs(expected[0]).max() > 1e4 * STEP
