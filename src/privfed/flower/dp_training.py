"""Distributed DP for Flower training: the nodes add the noise, the server never sees a clean sum.

Give :class:`~privfed.flower.SecAggWorkflow` a :class:`DistributedDP`::

    privacy = DistributedDP(epsilon=3.0, delta=1e-5, rounds=3, clip_norm=10.0,
                            num_clients=10, output_dir="out")
    flow = SecAggWorkflow(num_shares=10, reconstruction_threshold=6, privacy=privacy)

and every node's :func:`~privfed.flower.secagg_mod` does the rest (the
server's instructions carry the plan; the round's session id commits to it).
Each round a node flattens its update (new weights minus the round's global
weights), clips it to ``clip_norm``, rotates, rounds and noises it
(:mod:`privfed.dp.training`, :mod:`privfed.dp.training_codec`) and masks the
result in a ring of ``ring_bits`` bits.  The server unmasks the noisy sum,
removes the revealed excess noise layers, rotates back and divides by the
number of survivors; the strategy (plain FedAvg: the noise is already in)
receives the global weights plus that noisy average update, with the
survivor count as its example count.  No example count and no metric leaves
a node in a DP round.

Accounting: one :class:`~privfed.dp.PrivacyLedger` per run (budget ``(ε, δ)``),
one release per round, written to ``ledger.json`` (and the plan, its trust
statement and what each round delivered to ``dp_training.json``) in
``output_dir`` after every round.  A round the budget cannot take, or beyond
``rounds``, is not started (no message is sent; it is reported as skipped).

Adaptive clipping (``adaptive_clipping=``, Andrew et al. 2021;
:mod:`privfed.dp.adaptive_clipping`): the round's clip ``C_t`` goes to the nodes
in the round's public encoding; each node also masks its noised bit
``[‖update‖ <= C_t]`` as one more coordinate; the server moves the clip with the
noisy count, which the ledger charges as a second release of every round.

Who is trusted for what: :meth:`privfed.dp.training.TrainingNoisePlan.trust`.
A node refuses a round whose secure-aggregation settings differ from the
plan's (threshold, ``n_C``, nodes, ring, layers), whose plan it recomputes to
more than its policy's ``dp-max-epsilon``, or a plain round when it pins one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from flwr.app import ConfigRecord, Context, RecordDict

from privfed._atomic import atomic_write_text
from privfed._checks import check_int
from privfed.dp import PrivacyLedger
from privfed.dp.adaptive_clipping import AdaptiveClipping, next_clip_scale
from privfed.dp.distributed import DistributedMechanism
from privfed.dp.distributed_blocks import LAYER_SEED_BYTES
from privfed.dp.rounding import DEFAULT_BETA
from privfed.dp.training import TrainingNoisePlan, plan_training_noise, record_training_round
from privfed.dp.training_codec import decode_noisy_sum, encode_update, noise_ratio
from privfed.errors import BudgetExceededError, ParameterError, ParameterTypeError, ProtocolAbort
from privfed.flower._log import LOG
from privfed.flower._training_wire import Structure, TrainingEncoding, dtype_and_shape
from privfed.flower.policy import NodePolicy
from privfed.secagg import SecAggConfig

__all__ = [
    "DistributedDP",
    "check_private_round",
    "encode_private_reply",
    "layer_seeds",
    "rotation_seed",
]

_SEEDS_KEY: Final = "privfed_train_noise_layers"
_ROTATION_DOMAIN: Final = b"privfed.flower.dp_training/rotation/v1"


def rotation_seed(session: bytes) -> bytes:
    """The round's public rotation seed, from its (bound) session id: fresh every round."""
    return hashlib.sha256(_ROTATION_DOMAIN + session).digest()


class DistributedDP:
    """The distributed-DP settings of a training run (the server's side).

    Args:
        epsilon, delta: The run's budget over ``rounds`` rounds.
        rounds: ``R``, the rounds the budget covers (a run stops after them).
        clip_norm: ``C > 0``: each node clips its update to this L2 norm.
        num_clients: Nodes sampled each round (the noise is calibrated for
            ``t − n_C`` of them; a round with another count is skipped).
        mechanism: ``"skellam"`` (default) or ``"discrete-gaussian"``.
        ring_bits: Bits per coordinate of the masked vector (8..64, default 32).
        layers: Dropout-excess noise layers (``None``: with Skellam over the
            complete graph).
        model_size: Values of the model, if known: the plan is then made (and
            every error raised) here; else at the first round, before any message.
        output_dir: Where ``ledger.json`` and ``dp_training.json`` go (``None``: nowhere).
        beta: The conditional rounding's ``β``.
        adaptive_clipping: ``None`` (fixed clip), or
            :class:`~privfed.dp.adaptive_clipping.AdaptiveClipping`: ``clip_norm``
            is then the first round's clip, and each round's noisy count of nodes
            under the clip (one more masked coordinate, noised by the nodes,
            charged in the same ledger) moves it toward the target quantile.

    Raises:
        ParameterError, RingOverflowError, CalibrationError: At
            :class:`~privfed.flower.SecAggWorkflow` construction (or with
            ``model_size``, the first plan), for a bad configuration.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        *,
        rounds: int,
        clip_norm: float,
        num_clients: int,
        mechanism: DistributedMechanism = "skellam",
        ring_bits: int = 32,
        layers: bool | None = None,
        model_size: int | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        beta: float = DEFAULT_BETA,
        adaptive_clipping: AdaptiveClipping | None = None,
    ) -> None:
        self._args: dict[str, Any] = {
            "rounds": rounds, "clip_norm": clip_norm, "num_clients": num_clients,
            "mechanism": mechanism, "ring_bits": ring_bits, "layers": layers, "beta": beta,
        }  # fmt: skip
        if adaptive_clipping is not None:
            if not isinstance(adaptive_clipping, AdaptiveClipping):
                raise ParameterTypeError(
                    "adaptive_clipping", "an AdaptiveClipping or None", adaptive_clipping
                )
            nodes = check_int("num_clients", num_clients, minimum=2)
            self._args["count_noise_std"] = adaptive_clipping.count_std(nodes)
        self.adaptive_clipping = adaptive_clipping
        #: ``C_t / C_0``: the next round's clip over ``clip_norm`` (1 without adaptive clipping).
        self.clip_scale = 1.0
        self.epsilon, self.delta = epsilon, delta
        self.model_size = model_size
        self.output_dir = None if output_dir is None else Path(output_dir)
        self.ledger = PrivacyLedger(budget_epsilon=epsilon, budget_delta=delta)
        self.plan: TrainingNoisePlan | None = None
        #: Per round run: ``{"round", "survivors", "noise_std", "noise_over_central"}``.
        self.rounds_run: list[dict[str, Any]] = []
        self._threshold: int | None = None
        self._corrupted = 0

    @property
    def num_clients(self) -> int:
        """Nodes per round."""
        return int(self._args["num_clients"])

    def configure(self, *, threshold: int, corrupted: int, complete: bool) -> None:
        """Fix the secure-aggregation settings and check everything (called by the workflow).

        Raises:
            ParameterError, RingOverflowError, CalibrationError: A bad configuration.
        """
        self._threshold, self._corrupted = threshold, corrupted
        if not complete:
            if self._args["layers"]:
                raise ParameterError("layers", "False with a SecAgg+ graph", True)
            self._args["layers"] = False
        self._make(self.model_size or 1, final=self.model_size is not None)

    def _make(self, model_size: int, *, final: bool) -> TrainingNoisePlan:
        if self._threshold is None:
            raise ParameterError("privacy", "a DistributedDP given to a SecAggWorkflow", None)
        plan = plan_training_noise(
            self.epsilon, self.delta, model_size=model_size, threshold=self._threshold,
            corrupted=self._corrupted, ledger=self.ledger, **self._args,
        )  # fmt: skip
        if final:
            self.plan = plan
            LOG.info(
                "distributed DP: %s, b = %d bits, grid %.3g, noise/central %.3f, log wrap %.1f",
                plan.mechanism, plan.ring_bits, plan.granularity,
                noise_ratio(plan, plan.threshold), plan.log_wrap_probability,
            )  # fmt: skip
        return plan

    def plan_for(self, model_size: int) -> TrainingNoisePlan:
        """The run's plan (made at the first round); one model size per run.

        Raises:
            ParameterError: A model of another size than the plan's.
        """
        if self.plan is None:
            return self._make(model_size, final=True)
        if self.plan.model_size != model_size:
            raise ParameterError("arrays", f"{self.plan.model_size} values", model_size)
        return self.plan

    def refusal(self, nodes: int) -> str:
        """Why the next round must not start ("" if it may): count, rounds, budget."""
        plan = self.plan
        assert plan is not None  # noqa: S101 -- plan_for ran
        if nodes != plan.num_clients:
            return f"{nodes} nodes sampled; the DP plan is calibrated for {plan.num_clients}"
        if len(self.rounds_run) >= plan.rounds:
            return f"the privacy budget covers {plan.rounds} rounds, all run"
        trial = PrivacyLedger.from_json(self.ledger.to_json())
        try:
            record_training_round(trial, plan, len(self.rounds_run) + 1)
        except BudgetExceededError as exc:
            return f"privacy budget exhausted: {exc}"
        return ""

    def record(self, round_index: int) -> None:
        """Record the round's release in the ledger (before the server unmasks) and write it."""
        plan = self.plan
        assert plan is not None  # noqa: S101
        record_training_round(self.ledger, plan, check_int("round_index", round_index, minimum=0))
        self.write()

    def decoded(
        self, total: npt.NDArray[np.uint64], survivors: Sequence[int],
        revealed: Mapping[int, Mapping[int, bytes]], session: bytes, round_index: int,
        clip_scale: float = 1.0,
    ) -> npt.NDArray[np.float64]:  # fmt: skip
        """The noisy average update of a round (the server's only view of the updates)."""
        plan = self.plan
        assert plan is not None  # noqa: S101
        out = decode_noisy_sum(
            total, plan, round_seed=rotation_seed(session), survivors=survivors,
            revealed=revealed if plan.layers else None, clip_scale=clip_scale,
        )  # fmt: skip
        entry: dict[str, Any] = {
            "round": round_index,
            "survivors": out.survivors,
            "noise_std_of_mean": out.noise_std,
            "noise_over_central": noise_ratio(plan, out.survivors),
        }
        if self.adaptive_clipping is not None and out.under_clip_fraction is not None:
            entry["clip_norm"] = plan.clip_norm * clip_scale
            entry["noisy_fraction_under_clip"] = out.under_clip_fraction
            self.clip_scale = next_clip_scale(
                clip_scale, out.under_clip_fraction, self.adaptive_clipping
            )
        self.rounds_run.append(entry)
        self.write()
        return out.update

    def write(self) -> None:
        """``ledger.json`` and ``dp_training.json`` in ``output_dir`` (if set)."""
        if self.output_dir is None or self.plan is None:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        # Indented for a reader; PrivacyLedger.from_json reads it back unchanged.
        ledger_text = json.dumps(json.loads(self.ledger.to_json()), indent=2, sort_keys=True)
        atomic_write_text(self.output_dir / "ledger.json", ledger_text + "\n")
        guarantee = self.ledger.epsilon(self.delta) if self.ledger.releases else 0.0
        document = {
            "plan": self.plan.describe(),
            "rounds": self.rounds_run,
            "epsilon_spent": guarantee,
            "delta": self.delta,
        }
        text = json.dumps(document, indent=2, sort_keys=True)
        atomic_write_text(self.output_dir / "dp_training.json", text + "\n")


# -- the node's side ------------------------------------------------------------------


def check_private_round(
    encoding: TrainingEncoding, config: SecAggConfig, policy: NodePolicy
) -> None:
    """A node's check of a proposed round against its DP plan and its policy (before keys).

    Raises:
        ProtocolAbort: The round differs from what the plan is calibrated for,
            or its recomputed ε exceeds the policy's ``dp-max-epsilon``.
    """
    plan = encoding.privacy
    pin = policy.dp_max_epsilon
    if plan is None:
        if pin is not None:
            raise ProtocolAbort(
                f"this node trains only under distributed DP (privfed-dp-max-epsilon = {pin})"
            )
        return
    wanted = {
        "nodes": (len(config.client_ids), plan.num_clients),
        "threshold": (config.threshold, plan.threshold),
        "ring bits": (config.ring_bits, plan.ring_bits),
        "noise layers": (config.noise_layers, plan.layers),
    }
    for what, (got, want) in wanted.items():
        if got != want:
            raise ProtocolAbort(f"the round's {what} {got} is not the DP plan's {want}")
    if plan.corrupted < max(config.corrupted, policy.assumed_corrupted):
        raise ProtocolAbort(
            f"the DP plan assumes n_C = {plan.corrupted}, below the round's or this node's"
        )
    if config.round_index > plan.rounds:
        raise ProtocolAbort(f"round {config.round_index} is beyond the plan's {plan.rounds}")
    if pin is not None and plan.accounted_epsilon > pin:
        raise ProtocolAbort(
            f"the DP plan gives epsilon {plan.accounted_epsilon:.4g} > this node's "
            f"privfed-dp-max-epsilon {pin}"
        )


def layer_seeds(context: Context, config: SecAggConfig, client_id: int) -> list[bytes]:
    """This node's fresh secret layer seeds of a round (kept for its masked-input stage)."""
    record = context.state.config_records.get(_SEEDS_KEY)
    if record is not None and record.get("session") == config.session_id:
        stored = record.get("seeds")
        if isinstance(stored, list) and len(stored) == config.noise_layers:
            return [s for s in stored if isinstance(s, bytes)]
    seeds = [os.urandom(LAYER_SEED_BYTES) for _ in range(config.noise_layers)]
    context.state[_SEEDS_KEY] = ConfigRecord({"session": config.session_id, "seeds": seeds})
    return seeds


def _flat(arrays: Mapping[str, npt.NDArray[np.floating]], encoding: TrainingEncoding) -> Any:
    return np.concatenate(
        [np.asarray(arrays[a.name], dtype=np.float64).reshape(-1) for a in encoding.arrays]
    )


def encode_private_reply(
    encoding: TrainingEncoding,
    instructions: RecordDict,
    reply: RecordDict,
    *,
    session: bytes,
    seeds: Sequence[bytes],
) -> tuple[npt.NDArray[np.uint64], Structure]:
    """The node's noisy ring vector of a DP round and its reply's public structure.

    Raises:
        ParameterError: The reply's arrays differ from the layout.
    """
    plan = encoding.privacy
    assert plan is not None  # noqa: S101 -- a DP encoding
    _, weight_at = encoding._weight(reply)
    arrays = encoding._arrays(reply)
    new = {spec.name: array for spec, (_, array) in zip(encoding.arrays, arrays, strict=True)}
    given = {
        name: np.asarray(array.numpy())
        for record in instructions.array_records.values()
        for name, array in record.items()
        if dtype_and_shape(array)[0] in ("float32", "float64")
    }
    update = _flat(new, encoding) - _flat(given, encoding)
    encoded = encode_update(
        update, plan, round_seed=rotation_seed(session), layer_seeds=seeds,
        clip_scale=encoding.clip_scale,
    )  # fmt: skip
    structure = Structure(
        arrays=tuple((record, str(a.dtype)) for record, a in arrays), metrics=(), weight=weight_at
    )
    return encoded.vector, structure


def global_arrays(
    instructions: RecordDict, encoding: TrainingEncoding
) -> dict[str, npt.NDArray[np.float64]]:
    """The round's global float arrays by name (from any node's instructions)."""
    out = {}
    for record in instructions.array_records.values():
        for name, array in record.items():
            if dtype_and_shape(array)[0] in ("float32", "float64"):
                out[name] = np.asarray(array.numpy(), dtype=np.float64)
    missing = {a.name for a in encoding.arrays} - set(out)
    if missing:
        raise ParameterError("instructions", "the layout's arrays", sorted(missing))
    return out
