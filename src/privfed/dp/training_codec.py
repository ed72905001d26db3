"""A training round's client encoding and server decoding under distributed DP (pure numpy).

The two ends of :mod:`privfed.dp.training`'s pipeline, shared by the Flower
mod/workflow and any in-process use:

* :func:`encode_update` (client): clip, rotate, scale, round conditionally,
  add this client's noise (every layer), reduce mod ``2**b``: the ring vector
  it masks;
* :func:`decode_noisy_sum` (server): from the unmasked ring sum of the
  survivors, subtract the revealed excess layers, centre, rescale, rotate back
  and divide by the number of survivors: the noisy average update.

Threat model: the client's update and its noise exist on the client only;
what leaves it is masked.  The server only ever holds the noisy sum.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from privfed._checks import check_bytes
from privfed.dp.distributed import exact_discrete_gaussian, skellam_noise
from privfed.dp.distributed_blocks import LAYER_SEED_BYTES, excess_layer_noise, layered_noise
from privfed.dp.noise import Seed
from privfed.dp.rotation import rotate, unrotate
from privfed.dp.rounding import conditional_round
from privfed.dp.training import TrainingNoisePlan, central_noise_std
from privfed.errors import NonFiniteInputError, ParameterError

__all__ = [
    "EncodedUpdate",
    "NoisyAverage",
    "clip_update",
    "decode_noisy_sum",
    "encode_update",
    "noise_ratio",
]


def clip_update(update: npt.NDArray[np.floating], clip_norm: float) -> npt.NDArray[np.float64]:
    """``update`` (flattened, float64) scaled to L2 norm at most ``clip_norm``.

    Raises:
        NonFiniteInputError: The update holds NaN or infinity.
    """
    x = np.array(update, dtype=np.float64, copy=True).reshape(-1)
    if not np.isfinite(x).all():
        raise NonFiniteInputError("update", count=int(np.count_nonzero(~np.isfinite(x))))
    norm = float(np.linalg.norm(x))
    if norm > clip_norm:
        x *= clip_norm / norm * (1.0 - 1e-12)  # stays within the clip after rounding
    return x


@dataclasses.dataclass(frozen=True)
class EncodedUpdate:
    """A client's ring vector and public facts about how it was made.

    Attributes:
        vector: ``uint64`` values in ``[0, 2**b)`` (``d`` of them): what it masks.
        clipped: Whether the update was scaled down to the clip norm.
        rounding_tries: Draws of the conditional rounding.
    """

    vector: npt.NDArray[np.uint64] = dataclasses.field(repr=False)
    clipped: bool
    rounding_tries: int


def _client_noise(
    plan: TrainingNoisePlan, seed: Seed | None, layer_seeds: Sequence[bytes]
) -> npt.NDArray[np.int64]:
    d = plan.dimension
    if len(layer_seeds) != plan.layers:
        raise ParameterError("layer_seeds", f"exactly {plan.layers} seeds", len(layer_seeds))
    if plan.mechanism == "discrete-gaussian":
        return exact_discrete_gaussian(d, plan.noise, seed=seed)
    if not plan.layers:
        return skellam_noise(d, plan.noise, seed=seed)
    means = plan.layer_means
    noise = skellam_noise(d, means[0], seed=seed)
    for j, key in enumerate(layer_seeds, start=1):
        check_bytes("layer_seeds", key, size=LAYER_SEED_BYTES)
        noise += layered_noise([means[j]], [d], key)
    return noise


def encode_update(
    update: npt.NDArray[np.floating],
    plan: TrainingNoisePlan,
    *,
    round_seed: bytes,
    layer_seeds: Sequence[bytes] = (),
    noise_seed: Seed | None = None,
    rng: np.random.Generator | None = None,
) -> EncodedUpdate:
    """The client's noisy ring vector of one round (before masking).

    Args:
        update: New weights minus the round's global weights, ``model_size`` values.
        plan: The run's plan.
        round_seed: The round's public rotation seed.
        layer_seeds: This client's ``plan.layers`` secret 32-byte layer seeds
            (the ones it Shamir-shares).
        noise_seed: Seed of its own noise (layer 0): ``None`` (default) for the
            OS CSPRNG; fixed seeds only for tests.
        rng: Randomness of the rounding (default: seeded from :mod:`secrets`).

    Raises:
        ParameterError: The update has the wrong size, or wrong layer seeds.
        NonFiniteInputError: The update holds NaN or infinity.
    """
    x = np.asarray(update).reshape(-1)
    if x.size != plan.model_size:
        raise ParameterError("update", f"{plan.model_size} values", x.size)
    clipped = clip_update(x, plan.clip_norm)
    was_clipped = bool(np.linalg.norm(x.astype(np.float64)) > plan.clip_norm)
    scaled = rotate(clipped, round_seed) / plan.granularity
    generator = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    rounded, tries = conditional_round(scaled, plan.l2_bound, generator)
    noisy = rounded + _client_noise(plan, noise_seed, layer_seeds)
    mask = np.uint64((1 << plan.ring_bits) - 1) if plan.ring_bits < 64 else np.uint64(2**64 - 1)
    return EncodedUpdate(noisy.view(np.uint64) & mask, was_clipped, tries)


@dataclasses.dataclass(frozen=True)
class NoisyAverage:
    """What the server gets from a round: the noisy average update (already DP).

    Attributes:
        update: The noisy mean of the survivors' clipped updates (``model_size`` values).
        survivors: How many clients are in the sum (the public divisor).
        noise_std: Std per coordinate of the noise in ``update`` (model units).
    """

    update: npt.NDArray[np.float64] = dataclasses.field(repr=False)
    survivors: int
    noise_std: float


def decode_noisy_sum(
    total: npt.NDArray[np.unsignedinteger],
    plan: TrainingNoisePlan,
    *,
    round_seed: bytes,
    survivors: Sequence[int],
    revealed: Mapping[int, Mapping[int, bytes]] | None = None,
) -> NoisyAverage:
    """The server's decoding of the unmasked noisy ring sum (post-processing).

    Args:
        total: The ring sum (``d`` values, mod ``2**b``).
        plan: The run's plan.
        round_seed: The round's public rotation seed.
        survivors: Client ids whose input is in the sum.
        revealed: Survivor id -> {layer -> seed} of the excess layers
            (``SecAggServer.revealed_noise_seeds``); required iff ``plan.layers``.

    Raises:
        ParameterError: Wrong shape, or revealed layers other than the reveal rule's.
    """
    arr = np.array(total, dtype=np.uint64, copy=True).reshape(-1)
    if arr.size != plan.dimension:
        raise ParameterError("total", f"{plan.dimension} values", arr.size)
    u = len(survivors)
    if u < 1:
        raise ParameterError("survivors", "at least one survivor", u)
    if plan.layers:
        if revealed is None:
            raise ParameterError("revealed", "the revealed layer seeds of a layered plan", None)
        arr -= excess_layer_noise(
            revealed,
            [plan.layer_means],
            [plan.dimension],
            num_clients=plan.num_clients,
            survivors=survivors,
        )
    b = plan.ring_bits
    if b < 64:
        arr &= np.uint64((1 << b) - 1)
        signed = arr.astype(np.int64)
        signed[signed >= 1 << (b - 1)] -= 1 << b
    else:
        signed = arr.view(np.int64)
    total_sum = unrotate(signed.astype(np.float64) * plan.granularity, round_seed, plan.model_size)
    return NoisyAverage(
        update=total_sum / u, survivors=u, noise_std=plan.delivered_std(u) / u
    )


def noise_ratio(plan: TrainingNoisePlan, survivors: int) -> float:
    """Delivered noise std on the sum over the central Gaussian's std for the same budget."""
    return plan.delivered_std(survivors) / central_noise_std(plan)
