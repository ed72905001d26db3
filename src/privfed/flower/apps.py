"""The ServerApp and ClientApp that ``examples/flower_app`` names: one app, three jobs.

Run config ``job`` picks what runs:

* ``"latent"`` (default) -- the latent-statistic job
  (:mod:`privfed.flower.latent_app`), the same artefacts as ``privfed run``;
* ``"factory"`` -- the factory job (:mod:`privfed.flower.factory_app`);
* ``"sum"`` -- a secure sum of demo vectors (:mod:`privfed.flower.secagg_app`).

The ClientApp is privfed's one ClientApp (:func:`privfed.flower.node_app.make_client_app`),
the same one :func:`~privfed.flower.latent_app.latent_client_app` and the
tests run.  A privfed error in the ServerApp (too few nodes, a bad run-config
value, a round that could not complete) is logged by Flower as one line, not
a traceback (:func:`privfed.flower.server.quiet_privfed_errors`).

``flwr run examples/flower_app`` runs it in the simulation engine;
``scripts/flower_deploy.py`` on SuperLink + SuperNodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from privfed.flower.latent_app import latent_main
from privfed.flower.node_app import JOBS, job_of, make_client_app
from privfed.flower.secagg_app import expected_sum
from privfed.flower.server import (
    quiet_privfed_errors,
    run_active_fields,
    say,
    sum_round,
    wait_for_federation,
)
from privfed.secagg import ClientIds

__all__ = ["JOBS", "client_app", "server_app"]


def _sum_main(grid: Grid, run: Any) -> None:
    count = int(run.get("num-clients", 2))
    fields = run_active_fields(run, count)
    partitions = wait_for_federation(grid, run, count, registry=fields.get("identities"))
    flow = sum_round(run, len(partitions), fields)
    ids = ClientIds.from_partitions(partitions.values())
    result = flow.run(grid, ids.of_nodes(partitions))
    expected = expected_sum(list(ids.partition_ids(result.survivors)), 0, flow.vector_length)
    if not np.array_equal(result.total, expected):  # pragma: no cover -- a bug
        raise RuntimeError("the secure sum differs from the plaintext sum")
    print(f"privfed secure sum over Flower: {len(result.survivors)} survivors, exact")


server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    quiet_privfed_errors()
    run = dict(context.run_config)
    job = job_of(run)
    say(f"job {job!r}")
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


client_app = make_client_app()
