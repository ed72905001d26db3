"""The latent-statistic job's node side: statistics, noise share and declaration.

What a Flower node of the latent job (``privfed run --engine latent`` over
Flower) computes, for the one ClientApp of :mod:`privfed.flower.node_app`:

* :func:`pipeline_config` -- the job's config from the run config;
* :func:`node_inputs` -- the node's exact statistics as a ring vector (its own
  partition, encoded with the public codec) and the run's public noise plan;
* with distributed noise, the node checks that the round is the one its plan
  is calibrated for (:func:`check_round_config`), adds its noise share before
  masking (layer seeds fresh per session, or from the public ``noise-seed``)
  and declares what it added (:func:`declaration_for`), so that the server
  refuses any node whose app does not noise as the plan says;
* scripted dropouts (``scripted-dropouts``, to reproduce ``privfed run``'s
  dropout plan) answer with an error reply at the planned stage.

torch is imported only when a statistic is computed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Context, Error, Message
from flwr.clientapp.typing import ClientAppCallable
from flwr.common.constant import ErrorCode

from privfed.errors import ParameterError, ProtocolAbort
from privfed.flower._log import LOG
from privfed.flower.declaration import DeclaredInput, NoiseDeclaration
from privfed.secagg import ClientIds, GraphMode, SecAggConfig

__all__ = [
    "check_round_config",
    "declaration_for",
    "node_inputs",
    "node_ring_vector",
    "pipeline_config",
]


def pipeline_config(run_config: Mapping[str, Any]) -> Any:
    """The :class:`~privfed.engines.latent.config.PipelineConfig` a run config names.

    Keys are the dashed field names (``num-clients``, ``noise-seed`` ...),
    every field of the config; missing ones take the job's defaults.
    ``noise-seed`` and ``clip-norm``
    below 0, and ``alpha`` of 0, stand for ``None`` (TOML has no null).

    Raises:
        ParameterError: A value outside its domain (the config's own checks).
    """
    import dataclasses

    from privfed.engines.latent.config import PipelineConfig

    fields: dict[str, Any] = {}
    for field in dataclasses.fields(PipelineConfig):
        key = field.name.replace("_", "-")
        if key not in run_config or key in _NOT_FROM_RUN_CONFIG:
            continue
        value = run_config[key]
        default = field.default
        negative = isinstance(value, (int, float)) and value < 0
        if (field.name in _OPTIONAL_NUMBERS and negative) or (field.name == "alpha" and value == 0):
            value = None
        elif isinstance(default, bool):
            value = bool(value)
        elif isinstance(default, float) or field.name in _OPTIONAL_FLOATS:
            value = float(value)
        elif isinstance(default, int) or field.name == "noise_seed":
            value = int(value)
        fields[field.name] = value
    return PipelineConfig(**fields)


# TOML has no null: these take a negative number for None.
_OPTIONAL_NUMBERS = frozenset({"noise_seed", "clip_norm"})
_OPTIONAL_FLOATS = frozenset({"clip_norm", "alpha"})
# Run-config keys of the Flower app that are not the job's (the node's device is its own).
_NOT_FROM_RUN_CONFIG = frozenset({"device", "num-threads"})


# -- the node ------------------------------------------------------------------------------

_CACHE: dict[tuple[str, int], tuple[npt.NDArray[np.uint64], Any]] = {}
# The run's (spec, plan): public, the same for every node of a process (simulations).
_PLANS: dict[str, tuple[Any, Any]] = {}


def node_ring_vector(config: Any, partition_id: int) -> npt.NDArray[np.uint64]:
    """One node's exact statistics as a ring vector (the job's own client stages).

    With distributed noise, on the plan's grid (:func:`node_inputs`); still exact.

    Args:
        config: The run's PipelineConfig.
        partition_id: The node's partition, in ``[0, config.num_clients)``.

    Raises:
        ParameterError: ``partition_id`` outside the partitions.
    """
    return node_inputs(config, partition_id)[0]


def node_inputs(config: Any, partition_id: int) -> tuple[npt.NDArray[np.uint64], Any]:
    """One node's exact ring vector and the run's distributed noise plan (``None``: central).

    The plan comes from :func:`privfed.engines.latent.job.run_spec`: public
    quantities only, the same on the server and on every node.

    Raises:
        ParameterError: ``partition_id`` outside the partitions.
    """
    import torch

    from privfed.engines.latent.job import run_spec
    from privfed.engines.latent.stages import client_statistics, encode, fit_codec, load_data

    key = (json.dumps(config.to_dict(), sort_keys=True), partition_id)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    if not 0 <= partition_id < config.num_clients:
        raise ParameterError("partition-id", f"an int in [0, {config.num_clients})", partition_id)
    device = torch.device(config.device)
    data = load_data(config)
    split = data.split
    codec = fit_codec(config, split.public)
    if key[0] not in _PLANS:
        _PLANS.clear()
        _PLANS[key[0]] = run_spec(config, codec, num_classes=data.num_classes)
    spec, plan = _PLANS[key[0]]
    idx = data.clients[partition_id]
    latents = encode(codec, split.private.images[idx], device)
    stats = client_statistics(latents, split.private.labels[idx], spec, device)
    vector = np.ascontiguousarray(stats.to_ring_vector(), dtype=np.uint64)
    _CACHE.clear()  # one job per process at a time
    _CACHE[key] = (vector, plan)
    return vector, plan


class _RunConfig:
    """The run config: Flower's (``Context.run_config``) under the app's own overrides."""

    def __init__(self, overrides: Mapping[str, Any] | None) -> None:
        self.overrides = dict(overrides or {})

    def of(self, context: Context) -> dict[str, Any]:
        return {**dict(context.run_config), **self.overrides}


class _ScriptedDropouts(_RunConfig):
    """A Mod: raises at the stage where the job's dropout plan says this node drops out."""

    def __call__(self, message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        from privfed.engines.latent.job import dropout_plan
        from privfed.flower import _wire

        stage = _wire.STAGE_OF_TYPE.get(message.metadata.message_type)
        run = self.of(context)
        if stage is not None and bool(run.get("scripted-dropouts", True)):
            pid = int(context.node_config.get("partition-id", -1))
            for when, who in dropout_plan(pipeline_config(run)).items():
                if pid in who and stage >= when:
                    # An error reply, as a failing node's; one log line, no traceback.
                    reason = f"scripted dropout of partition {pid} at {when.name}"
                    LOG.info("%s (scripted-dropouts=true)", reason)
                    return Message(
                        Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                        reply_to=message,
                    )
        return call_next(message, context)


#: Where a node keeps its fresh layer seeds between the advertise and masked-input stages.
_LAYER_SEEDS_KEY = "privfed_noise_layers"


class _LayerSeeds(_RunConfig):
    """The node's layer seeds (a :data:`~privfed.flower.client.NoiseSeedsFn`).

    Seeded runs derive them from the public ``noise-seed`` exactly as the
    in-process job does; otherwise they are fresh from the OS CSPRNG and kept
    in the node's ``Context.state`` (next to its protocol state, which holds
    them too) for the masked-input stage of the same session.
    """

    def __call__(self, context: Context, config: SecAggConfig, client_id: int) -> list[bytes]:
        from privfed.engines.latent.distributed import client_noise_seeds

        run = pipeline_config(self.of(context))
        pid = int(context.node_config["partition-id"])
        if run.noise_seed is not None:
            return client_noise_seeds(run.noise_seed, pid, config.noise_layers)[1]
        record = context.state.config_records.get(_LAYER_SEEDS_KEY)
        if record is not None and record.get("session") == config.session_id:
            stored = record.get("seeds")
            if isinstance(stored, list) and len(stored) == config.noise_layers:
                return [s for s in stored if isinstance(s, bytes)]
        seeds = client_noise_seeds(None, pid, config.noise_layers)[1]
        context.state[_LAYER_SEEDS_KEY] = ConfigRecord(
            {"session": config.session_id, "seeds": list(seeds)}
        )
        return seeds


def check_round_config(config: SecAggConfig, plan: Any) -> None:
    """A node's check that the round is the one its noise plan is calibrated for.

    The calibration assumes ``n`` clients, threshold ``t`` over the complete
    graph and ``L`` layers; a server asking for anything else (a lower
    threshold would lower the honest contributors n_min) is refused before
    the node's input leaves.

    Raises:
        ProtocolAbort: The round's config does not match the plan.
    """
    wanted = {
        "clients": plan.num_clients,
        "threshold": plan.threshold,
        "vector_length": plan.spec.num_values,
        "noise_layers": plan.layers,
        "graph": GraphMode.COMPLETE,
        "mode": str(plan.secagg_mode),
    }
    got = {
        "clients": len(config.client_ids),
        "threshold": config.threshold,
        "vector_length": config.vector_length,
        "noise_layers": config.noise_layers,
        "graph": config.graph,
        "mode": str(getattr(config.mode, "value", config.mode)),
    }
    wrong = sorted(k for k in wanted if wanted[k] != got[k])
    if wrong:
        raise ProtocolAbort(
            "the round's secure-aggregation config does not match this node's noise plan: "
            + ", ".join(f"{k} {got[k]} (plan: {wanted[k]})" for k in wrong)
        )


class _Values(_RunConfig):
    """The node's input for the latent job (a :data:`~privfed.flower.client.ValuesFn`).

    Central noise: the exact ring vector, declared as carrying no noise (the
    server adds it).  Distributed noise: the node checks the round against
    its plan, adds its noise share and declares what it added (mechanism,
    plan digest, layers, seeded), so that a server refuses a node whose app
    does not noise as the plan says.
    """

    def __init__(self, overrides: Mapping[str, Any] | None, seeds: _LayerSeeds) -> None:
        super().__init__(overrides)
        self.seeds = seeds

    def __call__(self, context: Context, config: SecAggConfig) -> DeclaredInput:
        from privfed.engines.latent.distributed import add_client_noise, client_noise_seeds

        pid = int(context.node_config["partition-id"])
        run = pipeline_config(self.of(context))
        vector, plan = node_inputs(run, pid)
        if plan is None:
            return DeclaredInput(vector, NoiseDeclaration.none(str(run.noise)))
        check_round_config(config, plan)
        own, _ = client_noise_seeds(run.noise_seed, pid, 0)
        cid = ClientIds(run.num_clients).protocol_id(pid)
        layers = self.seeds(context, config, cid) if plan.layers else []
        # The node's noise share, added to its exact vector before masking.
        noisy = add_client_noise(vector, plan, seed=own, layer_seeds=layers)
        return DeclaredInput(noisy, declaration_for(plan, seeded=run.noise_seed is not None))


def declaration_for(plan: Any, *, seeded: bool) -> NoiseDeclaration:
    """What a node noising by the distributed ``plan`` declares (and the server expects)."""
    return NoiseDeclaration(
        noise_model=str(plan.model.value),
        mechanism=plan.mechanism,
        plan_sha256=plan.digest(),
        layers=int(plan.layers),
        seeded=seeded,
    )
