"""Run privfed's Flower apps in Flower's simulation engine from Python.

``flwr run APP_DIR`` is the Flower way (see ``examples/flower_app``);
:func:`run_simulation` is the same engine from a script or a test: it takes
app *objects*, so a caller can build them with closures (a result callback, a
fault plan) that a run config cannot carry.

Flower 1.42's engine hands messages to the virtual nodes from a thread that,
every 0.1 s, asks its in-memory link state for each node's next message in
turn, and each ask scans every stored message: ``N x M`` scans per poll with
``M`` messages in flight: 0.6 s of one core per poll on average over a
SecAgg+ round at ``N = 500``, 2.4 s at ``M = 500`` (measured on a 2-core
machine; four times as much at ``N = 1000``).  The thread then never
sleeps, and takes a core from the ClientApps.  For the duration of
:func:`run_simulation` that thread runs :func:`_deliver_pending` instead:
the same messages (each node's first undelivered one in store order,
marked delivered and handed out in node order; every stored message's
expiry checked first, as Flower checks it), found in one pass over the
store.  Outside flwr 1.42 or another
link state, Flower's own thread runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from queue import Queue
from typing import Any, Final

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
    Ray passes task arguments and results up to :data:`_INLINE_BYTES`
    inline (Ray's own default is 100 KiB): Flower ships each message's node
    ``Context`` to the worker and back, and an active SecAgg+ node's stored
    state outgrows 100 KiB near 1,000 clients (its config holds the
    registry), where Ray's object store made a call cost 12.5 ms instead of
    2.3 ms (measured on 2 cores with a 141 KB state).

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
        "init_args": {
            "num_cpus": cpus,
            "num_gpus": 0,
            "_system_config": {"max_direct_call_object_size": _INLINE_BYTES},
        },
    }
    # Flower warns that this Python API is deprecated in favour of `flwr run`;
    # privfed offers both, so the warning is not the user's concern here.
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.ERROR if not verbose else logging.DEBUG)
    try:
        with _one_pass_delivery():
            flower_run_simulation(
                server_app,
                client_app,
                num_supernodes=num_supernodes,
                backend_config=backend,
                verbose_logging=verbose,
            )
    finally:
        flwr_logger.setLevel(level)


#: Ray's ``max_direct_call_object_size`` under :func:`run_simulation`, bytes.
_INLINE_BYTES: Final = 4 << 20
#: The flwr release whose delivery thread :func:`_deliver_pending` stands in for.
_CHECKED_FLWR: Final = "1.42."
#: Flower's delivery thread's pause between polls, s (``vce_api.add_messages_to_queue``).
_POLL_S: Final = 0.1


def _deliver_pending(state: Any, nodes: Mapping[int, int]) -> list[Any]:
    """Each node's first undelivered message in ``state``, marked delivered, in node order.

    What Flower's ``get_message_ins(node_id, limit=1)`` returns node after
    node (stored messages checked for expiry, first undelivered one per node
    in store order), in one pass over the store rather than one per node.
    """
    from flwr.supercore.date import now

    with state.lock:
        state._check_stored_messages(set(state.message_ins_store))
        first: dict[int, Any] = {}
        for message in state.message_ins_store.values():
            meta = message.metadata
            if meta.delivered_at == "" and meta.dst_node_id not in first:
                first[meta.dst_node_id] = message
        picked = [first[node] for node in nodes if node in first]
        delivered_at = now().isoformat()
        for message in picked:
            message.metadata.delivered_at = delivered_at
    return picked


def _one_pass_thread(flower_thread: Callable[..., None]) -> Callable[..., None]:
    """Flower's delivery thread with :func:`_deliver_pending` as its poll (its own
    thread on a link state other than the in-memory one it was written against)."""
    from flwr.server.superlink.linkstate import InMemoryLinkState

    def add_messages_to_queue(
        state: Any, queue: Queue[Any], nodes_mapping: Mapping[int, int], f_stop: threading.Event
    ) -> None:
        fits = isinstance(state, InMemoryLinkState) and all(
            hasattr(state, name) for name in ("lock", "message_ins_store", "_check_stored_messages")
        )
        if not fits:
            flower_thread(state, queue, nodes_mapping, f_stop)
            return
        while not f_stop.is_set():
            for message in _deliver_pending(state, nodes_mapping):
                queue.put(message)
            f_stop.wait(_POLL_S)

    return add_messages_to_queue


#: Guards the patch below: runs that overlap in one process share one patch,
#: installed by the first to enter and removed by the last to leave.
_PATCH_LOCK: Final = threading.Lock()
_patch: dict[str, Any] = {"users": 0, "flower": None, "ours": None}


@contextmanager
def _one_pass_delivery() -> Iterator[None]:
    """Flower's delivery thread replaced by :func:`_one_pass_thread` (flwr 1.42), then restored."""
    import flwr
    from flwr.server.superlink.fleet.vce import vce_api

    if not str(flwr.__version__).startswith(_CHECKED_FLWR):
        yield
        return
    with _PATCH_LOCK:
        if _patch["users"] == 0:
            flower_thread = getattr(vce_api, "add_messages_to_queue", None)
            if flower_thread is None:
                ours = None
            else:
                ours = _one_pass_thread(flower_thread)
                vce_api.add_messages_to_queue = ours
            _patch.update(flower=flower_thread, ours=ours)
        _patch["users"] += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _patch["users"] -= 1
            if _patch["users"] == 0:
                if _patch["ours"] is not None and vce_api.add_messages_to_queue is _patch["ours"]:
                    vce_api.add_messages_to_queue = _patch["flower"]
                _patch.update(flower=None, ours=None)
