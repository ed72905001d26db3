"""The ServerApp and ClientApp that ``examples/flower_app`` names: one app, three jobs.

Run config ``job`` picks what runs:

* ``"latent"`` (default) -- the latent-statistic job
  (:mod:`privfed.flower.latent_app`), the same artefacts as ``privfed run``;
* ``"factory"`` -- the factory job (:mod:`privfed.flower.factory_app`);
* ``"sum"`` -- a secure sum of demo vectors (:mod:`privfed.flower.secagg_app`).

``flwr run examples/flower_app`` runs it in the simulation engine;
``scripts/flower_deploy.py`` on SuperLink + SuperNodes.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privfed.errors import ParameterError, ProtocolAbort
from privfed.flower.client import add_secagg_handlers
from privfed.flower.latent_app import _ScriptedDropouts, latent_main, node_ring_vector
from privfed.flower.latent_app import pipeline_config as latent_config
from privfed.flower.secagg_app import demo_values, expected_sum
from privfed.flower.server import SecAggWorkflow, hello, wait_for_nodes
from privfed.secagg import SecAggConfig

__all__ = ["JOBS", "client_app", "server_app"]

#: The jobs this app runs (run config ``job``).
JOBS = ("latent", "factory", "sum")
_LOG = logging.getLogger("privfed.flower")


def _job(run: Any) -> str:
    job = str(run.get("job", "latent"))
    if job not in JOBS:
        raise ParameterError("job", f"one of {JOBS}", job)
    return job


def _sum_main(grid: Grid, run: Any) -> None:
    wait = float(run.get("wait-s", 300.0))
    nodes = wait_for_nodes(grid, int(run.get("num-clients", 2)), timeout=wait)
    partitions = hello(grid, nodes, timeout=wait)
    flow = SecAggWorkflow(
        threshold=int(run.get("threshold", 0)) or len(partitions) // 2 + 1,
        vector_length=int(run.get("vector-length", 1000)),
        timeout=float(run.get("timeout", 60.0)),
    )
    result = flow.run(grid, {node: pid + 1 for node, pid in partitions.items()})
    expected = expected_sum([c - 1 for c in result.survivors], 0, flow.vector_length)
    if not np.array_equal(result.total, expected):  # pragma: no cover -- a bug
        raise ProtocolAbort("the secure sum differs from the plaintext sum")
    _LOG.info("secure sum of %d nodes: exact", len(result.survivors))
    print(f"privfed secure sum over Flower: {len(result.survivors)} survivors, exact")


server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    run = dict(context.run_config)
    job = _job(run)
    if job == "latent":
        result = latent_main(grid, run)
        report = result.report
        print(
            f"privfed latent job over Flower: epsilon={report.epsilon:g}, "
            f"accuracy on synthetic data {report.accuracy_synthetic:.4f}; "
            f"artefacts in {run.get('output-dir', 'runs/flower-latent')}"
        )
    elif job == "factory":
        from privfed.flower.factory_app import factory_main

        factory_main(grid, run)
    else:
        _sum_main(grid, run)


def _values(context: Context, config: SecAggConfig) -> npt.NDArray[np.uint64]:
    run = dict(context.run_config)
    pid = int(context.node_config["partition-id"])
    if _job(run) == "latent":
        return node_ring_vector(latent_config(run), pid)
    return demo_values(pid, config.round_index, config.vector_length)


class _LatentOnly(_ScriptedDropouts):
    def __call__(self, message: Message, context: Context, call_next: Any) -> Any:
        if _job(context.run_config) != "latent":
            return call_next(message, context)
        return super().__call__(message, context, call_next)


client_app = add_secagg_handlers(ClientApp(mods=[_LatentOnly(None)]), _values)


def _register_factory_handlers() -> None:
    try:
        from privfed.flower.factory_app import add_factory_handlers
    except ImportError:  # pragma: no cover -- the factory app needs the engines
        return
    add_factory_handlers(client_app)


_register_factory_handlers()
