"""Run privfed's Flower apps in Flower's simulation engine from Python.

``flwr run APP_DIR`` is the Flower way (see ``examples/flower_app``);
:func:`run_simulation` is the same engine from a script or a test: it takes
app *objects*, so a caller can build them with closures (a result callback, a
fault plan) that a run config cannot carry.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from privfed._checks import check_float, check_int

__all__ = ["run_simulation"]


def run_simulation(
    server_app: ServerApp,
    client_app: ClientApp,
    *,
    num_supernodes: int,
    num_cpus: int | None = None,
    client_cpus: float = 1.0,
    verbose: bool = False,
) -> None:
    """Run ``server_app`` against ``num_supernodes`` virtual nodes running ``client_app``.

    Virtual node ``i`` gets node config ``partition-id=i`` and
    ``num-partitions=num_supernodes``.  The backend is Ray; ``num_cpus`` and
    ``client_cpus`` size it (at most ``num_cpus / client_cpus`` ClientApps
    run at once).  Ray's start takes some 10-20 s on a small machine.

    Args:
        server_app: The ServerApp (its ``main`` runs in a thread of this process).
        client_app: The ClientApp (shipped to Ray workers; build it from
            importable functions).
        num_supernodes: Virtual nodes, ``>= 1``.
        num_cpus: CPUs Ray may use (default: all).
        client_cpus: CPUs reserved per running ClientApp, ``> 0``.
        verbose: Flower's debug logging.

    Raises:
        Whatever ``server_app``'s main raised (re-raised by Flower).
    """
    from flwr.simulation import run_simulation as flower_run_simulation

    check_int("num_supernodes", num_supernodes, minimum=1)
    check_float("client_cpus", client_cpus, low=0.0, open_low=True, numpy=False)
    cpus = os.cpu_count() or 1 if num_cpus is None else check_int("num_cpus", num_cpus, minimum=1)
    backend: dict[str, Any] = {
        "client_resources": {"num_cpus": client_cpus, "num_gpus": 0.0},
        "init_args": {"num_cpus": cpus, "num_gpus": 0},
    }
    # Flower warns that this Python API is deprecated in favour of `flwr run`;
    # privfed offers both, so the warning is not the user's concern here.
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR if not verbose else logging.DEBUG)
    try:
        flower_run_simulation(
            server_app,
            client_app,
            num_supernodes=num_supernodes,
            backend_config=backend,
            verbose_logging=verbose,
        )
    finally:
        flwr_logger.setLevel(level)
