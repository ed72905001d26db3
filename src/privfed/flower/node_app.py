"""The one ClientApp of privfed's Flower jobs: every entry point builds its node from here.

``examples/flower_app`` (``privfed.flower.apps:client_app``),
:func:`~privfed.flower.latent_app.latent_client_app`,
:func:`~privfed.flower.secagg_app.sum_client_app`, the deployment script and
the tests all run the ClientApp :func:`make_client_app` builds, so what a
node adds to its input cannot differ between two ways of starting the same
job.  The run config's ``job`` picks the node's input:

* ``"latent"`` -- the node's statistics for the latent job, with its noise
  share and noise declaration under a distributed noise model
  (:mod:`privfed.flower.latent_node`);
* ``"sum"`` -- a public demo vector (:func:`demo_values`);
* ``"factory"`` -- no secure-aggregation input: the node fits and ships its
  factories (``query.privfed_factory_fit``, :mod:`privfed.flower.factory_app`).

A privfed refusal on the node (a rolled-back state, a round its plan is not
calibrated for, a scripted dropout) becomes one log line and an error reply,
which the server counts as that node's dropout; a bug still raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import ClientAppCallable
from flwr.common.constant import ErrorCode

from privfed.errors import ParameterError, PrivfedError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower._log import LOG
from privfed.flower.client import JournalFn, add_secagg_handlers
from privfed.flower.declaration import DeclaredInput
from privfed.flower.faults import Fault, fault_mod
from privfed.flower.latent_node import _LayerSeeds, _RunConfig, _ScriptedDropouts, _Values
from privfed.flower.policy import PolicyFn
from privfed.secagg import SecAggConfig

__all__ = ["JOBS", "demo_values", "job_of", "make_client_app"]

#: The jobs privfed's Flower app runs (run config ``job``).
JOBS = ("latent", "factory", "sum")


def job_of(run: Mapping[str, Any]) -> str:
    """The run config's ``job`` (default ``"latent"``).

    Raises:
        ParameterError: Not one of :data:`JOBS`.
    """
    job = str(run.get("job", "latent"))
    if job not in JOBS:
        raise ParameterError("job", f"one of {JOBS}", job)
    return job


def demo_values(partition_id: int, round_index: int, length: int) -> npt.NDArray[np.uint64]:
    """The demo input of one node in one round (public, reproducible: not private data)."""
    rng = np.random.default_rng([0x5EC, partition_id, round_index])
    return rng.integers(0, 2**64, size=length, dtype=np.uint64)


class _JobValues(_RunConfig):
    """The node's input for the round, by job."""

    def __init__(self, overrides: Mapping[str, Any] | None, latent: _Values) -> None:
        super().__init__(overrides)
        self.latent = latent

    def __call__(
        self, context: Context, config: SecAggConfig
    ) -> npt.NDArray[np.uint64] | DeclaredInput:
        job = job_of(self.of(context))
        if job == "latent":
            return self.latent(context, config)
        if job == "sum":
            pid = int(context.node_config["partition-id"])
            return demo_values(pid, config.round_index, config.vector_length)
        raise ProtocolAbort("the factory job sends no secure-aggregation input")


class _JobSeeds(_RunConfig):
    """The node's noise-layer seeds: only the latent job's distributed noise has any."""

    def __init__(self, overrides: Mapping[str, Any] | None, latent: _LayerSeeds) -> None:
        super().__init__(overrides)
        self.latent = latent

    def __call__(self, context: Context, config: SecAggConfig, client_id: int) -> Sequence[bytes]:
        if job_of(self.of(context)) != "latent":
            raise ProtocolAbort(
                "this node has no noise layers to share (noise_layers > 0 outside the latent job)"
            )
        return self.latent(context, config, client_id)


def _refusals_as_errors(
    message: Message, context: Context, call_next: ClientAppCallable
) -> Message:
    """A Mod: a privfed refusal becomes an error reply and one log line (no traceback).

    So does a failure of the node's storage (an ``OSError``: its journal's disk
    full or read-only): the answer was not journaled, so it does not leave, and
    the node refuses the stage (:class:`~privfed.errors.ProtocolAbort`).
    """
    try:
        try:
            return call_next(message, context)
        except OSError as exc:
            raise ProtocolAbort(f"this node's storage failed: {type(exc).__name__}: {exc}") from exc
    except PrivfedError as exc:
        stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
        where = stage.name if stage is not None else message.metadata.message_type
        pid = context.node_config.get("partition-id", "?")
        reason = f"{type(exc).__name__}: {exc}"
        LOG.warning("privfed node (partition %s) refused at %s: %s", pid, where, exc)
        return Message(
            Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=message
        )


def make_client_app(
    run_config: Mapping[str, Any] | None = None,
    *,
    journal: JournalFn | None = None,
    faults: Mapping[tuple[int, int], Fault] | None = None,
    fault_delay: float = 5.0,
    policy: PolicyFn | None = None,
) -> ClientApp:
    """The ClientApp of privfed's Flower jobs (see the module docstring).

    Args:
        run_config: Overrides of Flower's run config (for
            :func:`privfed.flower.run_simulation`, whose nodes get no run
            config of their own); e.g. ``{"job": "sum"}``.
        journal: The nodes' reveal journals (default:
            :func:`privfed.flower.client.default_journal`).
        faults: Injected faults (:func:`privfed.flower.faults.fault_mod`),
            for rehearsals; ``None`` in a deployment.
        fault_delay: Seconds a ``"silent"`` fault waits before answering.
        policy: The nodes' policy (default: each node's node config,
            :func:`~privfed.flower.policy.default_policy`); e.g. a
            :class:`~privfed.flower.policy.PolicyFiles` in a simulation.

    Returns:
        A ClientApp with privfed's secure-aggregation, hello and factory handlers.
    """
    mods: list[Any] = [_refusals_as_errors]
    if faults:
        mods.append(fault_mod(faults, delay=fault_delay))
    mods.append(_LatentDropouts(run_config))
    seeds = _LayerSeeds(run_config)
    app = _NodeApp(mods=mods)
    add_secagg_handlers(
        app,
        _JobValues(run_config, _Values(run_config, seeds)),
        journal=journal,
        noise_seeds=_JobSeeds(run_config, seeds),
        policy=policy,
    )
    from privfed.flower.factory_app import add_factory_handlers

    add_factory_handlers(app)
    # What each part copied when it was built: the copies the app holds.
    app._seal(
        (
            None if run_config is None else dict(run_config),
            journal,
            None if faults is None else dict(faults),
            fault_delay,
            policy,
        )
    )
    return app


def _rebuilt(
    run_config: Mapping[str, Any] | None,
    journal: JournalFn | None,
    faults: Mapping[tuple[int, int], Fault] | None,
    fault_delay: float,
    policy: PolicyFn | None,
) -> ClientApp:
    """:func:`make_client_app` of a pickled :class:`_NodeApp`'s arguments."""
    return make_client_app(
        run_config, journal=journal, faults=faults, fault_delay=fault_delay, policy=policy
    )


class _NodeApp(ClientApp):
    """The ClientApp :func:`make_client_app` returns, pickled as the arguments it was built from.

    Flower's simulation engine pickles the ClientApp with every message it
    hands to a worker: in full, the app's handlers and mods are some 10 KB
    of closures, pickled in 1.6 ms (measured with Ray's cloudpickle).  As
    long as nothing was registered on the app since :func:`make_client_app`
    built it (same handlers, mods, lifespan: compared by identity), it
    pickles as :func:`_rebuilt` of those arguments, which builds the same
    app; otherwise in full, as any ClientApp.
    """

    _built: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None

    def _parts(self) -> tuple[Any, ...]:
        return (*self._registered_funcs.items(), *self._mods, self._call, self._lifespan)

    def _seal(self, arguments: tuple[Any, ...]) -> None:
        self._built = (arguments, self._parts())

    def __reduce_ex__(self, protocol: Any) -> Any:
        built = self._built
        if built is not None:
            then, now = built[1], self._parts()
            if len(then) == len(now) and all(_same(a, b) for a, b in zip(then, now, strict=True)):
                return (_rebuilt, built[0])
        return super().__reduce_ex__(protocol)


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same objects (pairs: item by item)."""
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    return a is b


class _LatentDropouts(_ScriptedDropouts):
    """The latent job's scripted dropouts (other jobs have none)."""

    def __call__(self, message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        if job_of(self.of(context)) != "latent":
            return call_next(message, context)
        return super().__call__(message, context, call_next)
