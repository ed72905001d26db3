"""The in-process distributed round of the latent engine: noise, mask, sum, decode.

:func:`aggregate_distributed` plays the round a deployment plays over the
network (each client noises its exact ring vector with
:func:`~privfed.engines.latent.distributed.add_client_noise`, secure
aggregation sums the noisy vectors, the server decodes the noisy total with
:func:`~privfed.engines.latent.distributed.decode_noisy_total`), for the
``privfed run`` job, its tests and benchmarks.  The plan and the two halves of
the mechanism live in :mod:`privfed.engines.latent.distributed`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfed.engines.latent.distributed import (
    DistributedNoisePlan,
    add_client_noise,
    client_noise_seeds,
    decode_noisy_total,
    exact_ring_vector,
    layers_supported,
)
from privfed.engines.latent.release import NoisyLatentStatistics
from privfed.engines.latent.statistics import LatentStatistics
from privfed.errors import ParameterError
from privfed.secagg import ClientIds, IdentityKey, SecurityMode, Stage, run_protocol

__all__ = ["DistributedAggregation", "aggregate_distributed", "secagg_options"]


@dataclass(frozen=True, eq=False)
class DistributedAggregation:
    """What a distributed round delivered to the server, and what it cost the clients.

    Attributes:
        noisy: The decoded noisy release (the server's only view of the data).
        survivors: 0-based indices of the clients whose input is in the total.
        server_total: The ring total the server unmasked (noisy; for tests).
        bytes_per_client: Mean bytes sent by a client that finished the round.
        noise_seconds: Per client, seconds spent drawing and adding its noise.
        secagg_client_seconds: Mean protocol seconds of a client that finished.
    """

    noisy: NoisyLatentStatistics = field(repr=False)
    survivors: tuple[int, ...]
    server_total: npt.NDArray[np.uint64] = field(repr=False)
    bytes_per_client: float
    noise_seconds: tuple[float, ...]
    secagg_client_seconds: float


def secagg_options(mode: str, corrupted: int, num_clients: int) -> dict[str, Any]:
    """Keyword arguments of :func:`privfed.secagg.run_protocol` for a simulated round's mode.

    Semi-honest: none.  Active: ``mode``, ``corrupted = n_C`` (the clients then
    refuse ``2t <= n + n_C``) and one fresh Ed25519 identity key per simulated
    client; :func:`~privfed.secagg.run_protocol` builds the registry from their
    public keys with ``assumed_corrupted = n_C`` pinned.

    Threat model: in a simulation the harness plays the integrator, so it
    holds every key; a deployment gives each client its own key and publishes
    only the registry.
    """
    if mode == "semi-honest":
        return {}
    if mode != "active":
        raise ParameterError("secagg_mode", "'semi-honest' or 'active'", mode)
    keys = {cid: IdentityKey.generate() for cid in ClientIds(num_clients).client_ids}
    return {"mode": SecurityMode.ACTIVE, "corrupted": corrupted, "identity_keys": keys}


def aggregate_distributed(
    client_stats: Sequence[LatentStatistics],
    plan: DistributedNoisePlan,
    *,
    dropouts: Mapping[Stage, Sequence[int]],
    noise_seed: int | None = None,
    noise_scale: float = 1.0,
) -> DistributedAggregation:
    """Play a distributed round in process: every client noises, masks and sends its vector.

    Each client adds its noise to its exact ring vector (:func:`add_client_noise`)
    before the vector enters secure aggregation (a real double-masking round
    over serialized messages, :func:`privfed.secagg.run_protocol`); the server
    unmasks the noisy total and decodes it (:func:`decode_noisy_total`).

    Args:
        client_stats: Each client's exact statistics (``plan.spec``).
        plan: The shared plan.
        dropouts: Scripted dropouts (0-based indices per stage).
        noise_seed: ``None`` (default): OS-CSPRNG noise; an int makes every
            client's noise reproducible (experiments and tests).
        noise_scale: Test hook of the auditor (see :func:`add_client_noise`).

    Raises:
        ProtocolAbort: Fewer than ``threshold`` clients remained.
    """
    if len(client_stats) != plan.num_clients:
        raise ParameterError("client_stats", f"{plan.num_clients} clients", len(client_stats))
    if plan.layers and not layers_supported():
        raise ParameterError(
            "plan",
            "a plan without noise layers (secure aggregation cannot share them)",
            plan.layers,
        )
    vectors = []
    seconds = []
    seeds = []
    for i, stats in enumerate(client_stats):
        if stats.config != plan.spec:
            raise ParameterError("client_stats", "statistics with the plan's spec", i)
        own_seed, layer_seeds = client_noise_seeds(noise_seed, i, plan.layers)
        seeds.append(layer_seeds)
        start = time.perf_counter()
        vectors.append(
            add_client_noise(
                exact_ring_vector(stats),
                plan,
                seed=own_seed,
                layer_seeds=layer_seeds,
                noise_scale=noise_scale,
            )
        )
        seconds.append(time.perf_counter() - start)
    plain = {stage: list(ids) for stage, ids in dropouts.items()}
    revealed: Mapping[int, Mapping[int, bytes]] | None = None
    if plan.layers:
        report, revealed = _run_layered(vectors, seeds, plan, plain)
    else:
        report = run_protocol(
            vectors,
            threshold=plan.threshold,
            dropouts=plain,
            **secagg_options(plan.secagg_mode, plan.corrupted, plan.num_clients),
        )
    noisy = decode_noisy_total(
        report.total,
        plan,
        survivors=report.survivors,
        revealed=revealed,
        seeded=noise_seed is not None,
    )
    full = [c for c in report.clients if Stage.UNMASKING in c.bytes_sent]
    return DistributedAggregation(
        noisy=noisy,
        survivors=ClientIds(len(vectors)).partition_ids(report.survivors),
        server_total=np.asarray(report.total, dtype=np.uint64),
        bytes_per_client=float(np.mean([c.total_bytes for c in full])) if full else 0.0,
        noise_seconds=tuple(seconds),
        secagg_client_seconds=report.mean_client_seconds,
    )


def _run_layered(
    vectors: Sequence[npt.NDArray[np.uint64]],
    seeds: Sequence[Sequence[bytes]],
    plan: DistributedNoisePlan,
    dropouts: Mapping[Stage, list[int]],
) -> tuple[Any, Mapping[int, Mapping[int, bytes]]]:
    """The round with secret-shared layer seeds (interface I3 of secure aggregation)."""
    report = run_protocol(
        list(vectors),
        threshold=plan.threshold,
        dropouts=dropouts,
        noise_layers=plan.layers,
        noise_seeds=[list(s) for s in seeds],
        **secagg_options(plan.secagg_mode, plan.corrupted, plan.num_clients),
    )
    return report, report.revealed_noise_seeds
