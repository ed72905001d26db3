"""Client-level DP federated training: Flower's central recipe vs privfed's distributed noise.

One run, in process (no Flower simulation: its engine is too slow for this grid
on a small CPU).  A NumPy MLP (``features -> --hidden ReLU -> classes``; 1,210
parameters on the digits) trains by FedAvg on the bundled scikit-learn digits
(8x8 images, 64 features scaled to [0, 1], not upscaled; 80/20 train/test split)
or on ``--npz PATH`` (``x_train/y_train/x_test/y_test`` or ``x/y``), the train
split dealt IID to N clients.  Per N in ``--clients``, per ε in ``--epsilons``
(δ = ``--delta``, over R = ``--rounds`` rounds), four arms from the same initial
model and the same local training:

* ``central`` -- Flower's central DP recipe (fl-dp-sa:
  ``DifferentialPrivacyClientSideFixedClipping``): clients clip their update to
  ``C``, secure aggregation sums them, the server adds Gaussian noise of std
  ``σ = z·C`` to the sum (``z·C/m`` on the mean).  ``σ`` is calibrated for
  the R-fold composition at (ε, δ) with the analytic Gaussian
  (``privfed.dp.training.central_noise_std``, exact for Gaussians), and each
  round is recorded in a :class:`privfed.dp.PrivacyLedger` (GaussianRelease)
  whose ε is reported.  The server holds the noiseless sum.
* ``skellam`` / ``discrete-gaussian`` -- privfed's distributed DP
  (``privfed.dp.training.plan_training_noise`` + ``privfed.dp.training_codec``):
  each client clips, rotates, rounds, adds its own noise (Skellam with
  secret-shared noise layers, or the exact discrete Gaussian), in a ``b``-bit
  ring; the server only decodes a noisy sum.  One ledger per run.
* ``none`` -- plain FedAvg, unclipped, no noise, no secure aggregation.

Accuracy: the mean over ``--seeds`` training seeds (initial model, shards,
local SGD, central noise; the distributed noise is always fresh from the OS
CSPRNG), with its standard error; the train/test split and the audit use ``--seed``.

Secure aggregation.  Round 1 of every ``central``/distributed arm (first seed) runs the real
protocol (``privfed.secagg.run_protocol``, complete graph, semi-honest) with
``--dropout`` of the clients dropping before their masked input: its per-client
seconds and bytes, the server's seconds, and a survivor set ``u < N`` (the
noise std is reported as the max over the survivor sets the run met).  Later
rounds sum the same ring vectors directly: the protocol's output is exactly the
modular sum of the survivors' vectors (``tests/test_benchmark_dp_training.py``
checks this, with the revealed layer seeds), so accuracy is unaffected.

Threshold ``t = max(N//2 + 1, N - 24)``: the Skellam layers are ``L = N - t``
(at most 24) because the layer shares travel inside each pairwise share
ciphertext, capped at 4,096 bytes by the protocol (N = 100 with ``t = 51``,
49 layers, is refused there).

An audit (Steinke, Nasr & Jagielski 2023, one run): ``--canaries`` m canary
clients join ``--audit-clients`` real ones (the plan covers all N + m slots);
each canary is included with probability 1/2 and then sends
``C·u_k`` every round (``u_k`` a random unit direction); an excluded canary's
slot sends zeros (the plan's add/remove adjacency).  Score: the final model
delta dotted with ``u_k``; ``privfed.audit.one_run_audit`` with r = m/10 guesses
(fixed before the run) gives the ε lower bound, for ``skellam`` at
``--audit-epsilon`` and for ``none``.  Beside it, from the same run, the
*estimate* of Andrew et al. 2024 (``privfed.audit.canary_client_epsilon``,
``canary_client_estimate`` in the JSON; an estimate, not a bound): the cosines
of the final delta with the included canaries (canary clients that sent
``C·u_k`` every round) against those with the excluded canaries' directions
(random directions the run never saw: the null).

Usage::

    python benchmarks/dp_training.py            # N = 20, 100; eps = 1, 3, 8; R = 10
    python benchmarks/dp_training.py --quick    # tiny smoke run (seconds)

Writes ``benchmarks/results/dp_training.json`` and ``.png`` (``--quick``:
``dp_training_quick.*``).  Seconds are wall time on a shared CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_OUT = RESULTS / "dp_training.json"
QUICK_OUT = RESULTS / "dp_training_quick.json"
SCHEMA = "privfed-benchmark-dp-training/1"
ARMS = ("central", "skellam", "discrete-gaussian", "none")
DISTRIBUTED = ("skellam", "discrete-gaussian")
#: Most Skellam layers whose shares fit the protocol's share ciphertext.
MAX_LAYERS = 24
#: Bits of the central arm's fixed-point ring (Flower's SecAgg+ default modulus 2**32).
CENTRAL_RING_BITS = 32

Vector = npt.NDArray[np.float64]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def threshold_for(n: int) -> int:
    """The secure-aggregation threshold of N clients (module notes)."""
    return max(n // 2 + 1, n - MAX_LAYERS)


# --------------------------------------------------------------------------- data and model


def load_data(npz: str | None, seed: int) -> tuple[npt.NDArray[Any], ...]:
    """(x_train, y_train, x_test, y_test): digits by default, else the ``.npz`` file."""
    if npz is None:
        from sklearn.datasets import load_digits

        bunch = load_digits()
        x, y = bunch.data / 16.0, bunch.target
    else:
        with np.load(npz) as f:
            parts = ("x_train", "x_test") if "x_train" in f else ("x",)
            x = np.concatenate([f[k].reshape(len(f[k]), -1) for k in parts]).astype(np.float64)
            y = np.concatenate([f[k.replace("x", "y", 1)] for k in parts])
        x = x / max(float(x.max()), 1.0)
    order = np.random.default_rng([seed, 0]).permutation(len(y))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]].astype(np.int64), x[order[cut:]], y[order[cut:]]


@dataclasses.dataclass(frozen=True)
class Mlp:
    """A one-hidden-layer ReLU MLP on a flat float64 parameter vector, trained by local SGD."""

    features: int
    hidden: int
    classes: int
    epochs: int = 2
    batch: int = 8
    lr: float = 0.3

    @property
    def size(self) -> int:
        return (self.features + 1) * self.hidden + (self.hidden + 1) * self.classes

    def split(self, w: Vector) -> tuple[Vector, Vector, Vector, Vector]:
        f, h, c = self.features, self.hidden, self.classes
        a, b = f * h, f * h + h
        return (w[:a].reshape(f, h), w[a:b], w[b : b + h * c].reshape(h, c), w[b + h * c :])

    def initial(self, seed: int) -> Vector:
        rng = np.random.default_rng([seed, 2])
        w = np.zeros(self.size)
        w1, _, w2, _ = self.split(w)
        w1[:] = rng.normal(size=w1.shape) / math.sqrt(self.features)
        w2[:] = rng.normal(size=w2.shape) / math.sqrt(self.hidden)
        return w

    def fit(self, w: Vector, x: Vector, y: npt.NDArray[np.int64], seed: Sequence[int]) -> Vector:
        """Local SGD from ``w``: the new weights."""
        out = w.copy()
        w1, b1, w2, b2 = self.split(out)  # views: updated in place
        rng = np.random.default_rng(list(seed))
        onehot = np.eye(self.classes)[y]
        for _ in range(self.epochs):
            order = rng.permutation(len(y))
            for start in range(0, len(y), self.batch):
                idx = order[start : start + self.batch]
                hid = np.maximum(x[idx] @ w1 + b1, 0.0)
                logits = hid @ w2 + b2
                prob = np.exp(logits - logits.max(axis=1, keepdims=True))
                g = (prob / prob.sum(axis=1, keepdims=True) - onehot[idx]) / len(idx)
                g_hid = (g @ w2.T) * (hid > 0)
                w2 -= self.lr * (hid.T @ g)
                b2 -= self.lr * g.sum(axis=0)
                w1 -= self.lr * (x[idx].T @ g_hid)
                b1 -= self.lr * g_hid.sum(axis=0)
        return out

    def accuracy(self, w: Vector, x: Vector, y: npt.NDArray[np.int64]) -> float:
        w1, b1, w2, b2 = self.split(w)
        return float(np.mean((np.maximum(x @ w1 + b1, 0.0) @ w2 + b2).argmax(axis=1) == y))


@dataclasses.dataclass(frozen=True)
class Task:
    """What every arm shares: data, model, clients, rounds and the DP constants."""

    data: tuple[npt.NDArray[Any], ...]
    model: Mlp
    rounds: int
    clip: float
    delta: float
    server_lr: float
    dropout: float
    seed: int

    def shards(self, n: int) -> list[tuple[Vector, npt.NDArray[np.int64]]]:
        x, y = self.data[0], self.data[1]
        order = np.random.default_rng([self.seed, 1]).permutation(len(y))
        return [(x[order[i::n]], y[order[i::n]]) for i in range(n)]

    def accuracy(self, w: Vector) -> float:
        return self.model.accuracy(w, self.data[2], self.data[3])


def make_task(args: argparse.Namespace) -> Task:
    data = load_data(args.npz, args.seed)
    classes = int(max(data[1].max(), data[3].max())) + 1
    model = Mlp(int(data[0].shape[1]), args.hidden, classes, epochs=args.epochs, lr=args.lr)
    return Task(data, model, args.rounds, args.clip, args.delta, args.server_lr, args.dropout,
                args.seed)  # fmt: skip


# --------------------------------------------------------------------------- aggregation


@dataclasses.dataclass
class Aggregator:
    """One arm's aggregation: updates of the round's clients -> the mean the server applies."""

    arm: str
    n: int
    task: Task
    epsilon: float | None
    ring_bits: int = 16
    plan: Any = None
    central_std: float = 0.0
    ledger: Any = None
    survivor_sets: set[int] = dataclasses.field(default_factory=set)
    client_encode_s: list[float] = dataclasses.field(default_factory=list)
    server_s: list[float] = dataclasses.field(default_factory=list)
    protocol: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from privfed.dp import PrivacyLedger
        from privfed.dp.training import central_noise_std, plan_training_noise

        if self.arm == "none":
            return
        assert self.epsilon is not None
        mechanism: Any = self.arm if self.arm in DISTRIBUTED else "skellam"  # central: C, R, ε only
        self.plan = plan_training_noise(
            self.epsilon, self.task.delta, rounds=self.task.rounds, clip_norm=self.task.clip,
            model_size=self.task.model.size, num_clients=self.n,
            threshold=threshold_for(self.n), mechanism=mechanism, ring_bits=self.ring_bits,
        )  # fmt: skip
        self.central_std = central_noise_std(self.plan)
        if self.arm == "central":
            self.ring_bits = CENTRAL_RING_BITS
            self.ledger = PrivacyLedger()
        else:
            self.ledger = PrivacyLedger(budget_epsilon=self.epsilon, budget_delta=self.task.delta)

    def mean(self, updates: list[Vector], round_index: int, secure: bool) -> Vector:
        if self.arm == "none":
            return np.asarray(np.mean(updates, axis=0), dtype=np.float64)
        if self.arm == "central":
            return self._central(updates, round_index, secure)
        return self._distributed(updates, round_index, secure)

    def _dropped(self, secure: bool) -> list[int]:
        k = math.ceil(self.task.dropout * self.n) if secure else 0
        return list(range(self.n - k, self.n))

    def _central(self, updates: list[Vector], round_index: int, secure: bool) -> Vector:
        from privfed.dp.noise import GAUSSIAN_SAMPLER
        from privfed.dp.releases.gaussian import GaussianRelease
        from privfed.dp.sensitivity import Adjacency
        from privfed.dp.training_codec import clip_update

        start = time.perf_counter()
        clipped = [clip_update(u, self.task.clip) for u in updates]
        self.client_encode_s.append((time.perf_counter() - start) / len(updates))
        if secure:
            total, u = self._central_secagg(clipped)
        else:
            total, u = np.sum(clipped, axis=0), len(clipped)
        start = time.perf_counter()
        rng = np.random.default_rng([self.task.seed, 7, round_index])
        noisy = total + rng.normal(0.0, self.central_std, size=total.shape)
        self.ledger.record(GaussianRelease(
            name=f"central-round-{round_index}", partition=None,
            l2_sensitivity=self.task.clip, noise_std=self.central_std,
            adjacency=Adjacency.ADD_REMOVE, sampler=GAUSSIAN_SAMPLER, seeded=True,
            dimension=total.size,
        ))  # fmt: skip
        self.server_s.append(time.perf_counter() - start)
        self.survivor_sets.add(u)
        return np.asarray(noisy / u)

    def _central_secagg(self, clipped: list[Vector]) -> tuple[Vector, int]:
        """Fixed point (2**22 steps over [-C, C], as Flower's SecAgg+ defaults) + the protocol."""
        scale = (2**22 - 1) / (2.0 * self.task.clip)
        ints = [np.round((c + self.task.clip) * scale).astype(np.uint64) for c in clipped]
        total, survivors = self._secure_sum(ints, CENTRAL_RING_BITS, 0, None)
        signed = total.astype(np.float64)
        return signed / scale - len(survivors) * self.task.clip, len(survivors)

    def _secure_sum(
        self, vectors: list[Any], bits: int, layers: int, seeds: list[list[bytes]] | None
    ) -> tuple[Any, tuple[int, ...]]:
        from privfed.secagg import Stage
        from privfed.secagg.runner import run_protocol

        report = run_protocol(
            vectors, threshold=threshold_for(self.n), ring_bits=bits, noise_layers=layers,
            noise_seeds=seeds, dropouts={Stage.MASKED_INPUT: self._dropped(True)},
        )  # fmt: skip
        alive = [c for c in report.clients if c.client_id in report.survivors]
        self.protocol = {
            "survivors": len(report.survivors),
            "client_secagg_s": float(np.mean([c.total_seconds for c in alive])),
            "bytes_per_client": float(np.mean([c.total_bytes for c in alive])),
            "server_secagg_s": report.total_server_seconds,
        }
        self._revealed = report.revealed_noise_seeds
        return report.total, report.survivors

    def _distributed(self, updates: list[Vector], round_index: int, secure: bool) -> Vector:
        from privfed.dp.training import record_training_round
        from privfed.dp.training_codec import decode_noisy_sum, encode_update

        plan = self.plan
        round_seed = os.urandom(32)
        seeds = [[os.urandom(32) for _ in range(plan.layers)] for _ in updates]
        start = time.perf_counter()
        vectors = [
            encode_update(u, plan, round_seed=round_seed, layer_seeds=s).vector
            for u, s in zip(updates, seeds, strict=True)
        ]
        self.client_encode_s.append((time.perf_counter() - start) / len(updates))
        record_training_round(self.ledger, plan, round_index)  # before the server unmasks
        if secure:
            total, survivors = self._secure_sum(vectors, plan.ring_bits, plan.layers,
                                                seeds if plan.layers else None)  # fmt: skip
            revealed = self._revealed
        else:
            total, survivors, revealed = direct_sum(vectors, seeds, plan.ring_bits)
        start = time.perf_counter()
        out = decode_noisy_sum(total, plan, round_seed=round_seed, survivors=survivors,
                               revealed=revealed if plan.layers else None)  # fmt: skip
        self.server_s.append(time.perf_counter() - start)
        self.survivor_sets.add(out.survivors)
        return out.update

    def summary(self) -> dict[str, Any]:
        """Noise, cost and accounting figures of the arm (JSON-ready)."""
        from privfed.dp.training_codec import noise_ratio

        size = self.task.model.size
        row: dict[str, Any] = {
            "survivor_sets": sorted(self.survivor_sets),
            "client_encode_s": _mean(self.client_encode_s),
            "server_decode_s": _mean(self.server_s),
            **(self.protocol or {"survivors": self.n, "client_secagg_s": 0.0,
                                 "bytes_per_client": 4.0 * size, "server_secagg_s": 0.0}),
        }  # fmt: skip
        if self.arm == "none":
            return {**row, "bits_per_coordinate": 32, "coordinates": size,
                    "noise_over_central": None, "central_noise_std": None,
                    "ledger_epsilon": None}  # fmt: skip
        ratios = (
            [1.0] if self.arm == "central"
            else [noise_ratio(self.plan, u) for u in sorted(self.survivor_sets)]
        )  # fmt: skip
        return {
            **row,
            "bits_per_coordinate": self.ring_bits,
            "coordinates": size if self.arm == "central" else self.plan.dimension,
            "noise_over_central": max(ratios),
            "noise_over_central_per_survivor_set": ratios,
            "central_noise_std": self.central_std,
            "noise_multiplier_z": self.central_std / self.task.clip,
            "ledger_epsilon": self.ledger.epsilon(self.task.delta),
            "plan": None if self.arm == "central" else _plan_figures(self.plan),
        }


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def accountant_gap(epsilon: float, delta: float, rounds: int) -> float:
    """σ a continuous Gaussian needs under the distributed arms' RDP accounting / the analytic σ.

    The part of ``noise_over_central`` that is the accountant's (RDP -> (ε, δ)
    conversion), not the mechanism's; no measurement, a calibration.
    """
    from privfed.dp.calibration import calibrate_analytic_gaussian
    from privfed.dp.distributed import RDP_ORDERS, rdp_epsilon

    orders = np.asarray(RDP_ORDERS, dtype=np.float64)
    analytic = calibrate_analytic_gaussian(epsilon, delta, l2_sensitivity=math.sqrt(rounds))
    low, high = 0.01 * analytic, 100.0 * analytic
    while high / low > 1 + 1e-9:
        mid = math.sqrt(low * high)
        fits = rdp_epsilon(rounds * orders / (2 * mid * mid), delta) <= epsilon
        low, high = (low, mid) if fits else (mid, high)
    return high / analytic


def _plan_figures(plan: Any) -> dict[str, Any]:
    described = plan.describe()
    keep = ("threshold", "layers", "granularity", "noise", "rounding_inflation",
            "log_wrap_probability_per_round", "accounted_epsilon", "dimension")  # fmt: skip
    return {k: described[k] for k in keep}


def direct_sum(
    vectors: Sequence[npt.NDArray[np.uint64]], seeds: Sequence[Sequence[bytes]], bits: int
) -> tuple[npt.NDArray[np.uint64], tuple[int, ...], dict[int, dict[int, bytes]]]:
    """What a no-dropout protocol round delivers: the ring sum, every id, all excess layers."""
    total = np.zeros(vectors[0].shape, dtype=np.uint64)
    for v in vectors:
        total += v
    if bits < 64:
        total &= np.uint64((1 << bits) - 1)
    ids = tuple(range(1, len(vectors) + 1))
    revealed = {i: {j: s for j, s in enumerate(seeds[i - 1], start=1)} for i in ids}
    return total, ids, revealed


# --------------------------------------------------------------------------- runs


def train(
    task: Task,
    aggregator: Aggregator,
    shards: list[tuple[Vector, npt.NDArray[np.int64]]],
    extra: Callable[[int], list[Vector]] | None = None,
    protocol: bool = True,
) -> tuple[Vector, list[float], float]:
    """R rounds of FedAvg through ``aggregator``: (final weights, accuracy per round, train s)."""
    w = task.model.initial(task.seed)
    accuracy, train_s = [], 0.0
    for r in range(1, task.rounds + 1):
        start = time.perf_counter()
        updates = [task.model.fit(w, x, y, (task.seed, 3, i, r)) - w
                   for i, (x, y) in enumerate(shards)]  # fmt: skip
        train_s += (time.perf_counter() - start) / len(shards)
        if extra is not None:
            updates += extra(r)
        secure = protocol and extra is None and r == 1 and aggregator.arm != "none"
        w = w + task.server_lr * aggregator.mean(updates, r, secure)
        accuracy.append(task.accuracy(w))
    return w, accuracy, train_s / task.rounds


def run_arm(
    task: Task, arm: str, n: int, epsilon: float | None, ring_bits: int, seeds: Sequence[int]
) -> dict[str, Any]:
    """One arm at one (N, ε), once per seed (init, shards, local SGD, noise); costs of the first."""
    start = time.perf_counter()
    curves, summary, train_s = [], None, []
    for seed in seeds:
        seeded = dataclasses.replace(task, seed=seed)
        aggregator = Aggregator(arm, n, seeded, epsilon, ring_bits=ring_bits)
        _, accuracy, fit_s = train(seeded, aggregator, seeded.shards(n), protocol=summary is None)
        curves.append(accuracy)
        train_s.append(fit_s)
        summary = summary or aggregator.summary()
    finals = [c[-1] for c in curves]
    row = {
        "arm": arm, "clients": n, "epsilon": epsilon, "delta": task.delta,
        "rounds": task.rounds, "seeds": list(seeds),
        "accuracy": [float(v) for v in np.mean(curves, axis=0)],
        "final_accuracy": float(np.mean(finals)), "final_accuracy_per_seed": finals,
        "final_accuracy_sem": float(np.std(finals, ddof=1) / math.sqrt(len(finals)))
        if len(finals) > 1 else None,
        "client_train_s": float(np.mean(train_s)), **(summary or {}),
        "wall_s": time.perf_counter() - start,
    }  # fmt: skip
    _log(f"N={n} eps={epsilon} {arm} b={row['bits_per_coordinate']}: "
         f"acc {row['final_accuracy']:.3f} {np.round(finals, 3)}, "
         f"noise/central {row['noise_over_central']}, {row['wall_s']:.1f} s")  # fmt: skip
    return row


def run_audit(
    task: Task, arm: str, real: int, canaries: int, epsilon: float | None, ring_bits: int
) -> dict[str, Any]:
    """The one-run canary audit of ``arm`` (module notes)."""
    from privfed.audit import BoundSpec, CanaryEstimateSpec, canary_client_epsilon, one_run_audit

    start = time.perf_counter()
    rng = np.random.default_rng([task.seed, 11])
    directions = rng.normal(size=(canaries, task.model.size))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    included = rng.random(canaries) < 0.5
    sends = [task.clip * d if inc else np.zeros(task.model.size)
             for d, inc in zip(directions, included, strict=True)]  # fmt: skip
    aggregator = Aggregator(arm, real + canaries, task, epsilon, ring_bits=ring_bits)
    w, accuracy, _ = train(task, aggregator, task.shards(real), extra=lambda r: list(sends))
    moved = w - task.model.initial(task.seed)
    scores = directions @ moved
    guesses = max(2, canaries // 10)
    audit = one_run_audit(scores, included, num_guesses=guesses, spec=BoundSpec(task.delta))
    cosines = scores / np.linalg.norm(moved)  # included: canary clients; excluded: the null
    spec = CanaryEstimateSpec(task.delta)
    estimate = canary_client_epsilon(
        cosines[included], cosines[~included], spec=spec, seed=task.seed
    )
    claim = aggregator.ledger.epsilon(task.delta) if aggregator.ledger is not None else None
    row = {
        "arm": arm, "real_clients": real, "canaries": canaries, "slots": real + canaries,
        "epsilon": epsilon, "claimed_epsilon": claim, "bits_per_coordinate": ring_bits,
        "final_accuracy": accuracy[-1], **audit.to_dict(),
        "score_mean_in": float(scores[included].mean()),
        "score_mean_out": float(scores[~included].mean()),
        "canary_client_estimate": {k: v for k, v in estimate.to_dict().items()
                                   if k not in ("cosines", "null_cosines")},
        "wall_s": time.perf_counter() - start,
    }  # fmt: skip
    _log(f"audit {arm}: eps_lb {audit.epsilon_lower_bound:.3f} (claim {claim}), "
         f"{audit.num_correct}/{audit.num_guesses} correct, canary-client estimate "
         f"{estimate.epsilon:.3f} {estimate.interval.lower:.3f}-{estimate.interval.upper:.3f}, "
         f"{row['wall_s']:.1f} s")  # fmt: skip
    return row


# --------------------------------------------------------------------------- goals, JSON, plot


def _find(runs: Sequence[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    hits = [r for r in runs if all(r.get(k) == v for k, v in match.items())]
    return hits[0] if hits else None


def _sem_points(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Standard error (points) of the difference of two arms' mean final accuracies."""
    if a.get("final_accuracy_sem") is None or b.get("final_accuracy_sem") is None:
        return None
    return 100.0 * math.hypot(a["final_accuracy_sem"], b["final_accuracy_sem"])


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """Each goal of the issue against what was measured (never assumed)."""
    runs, meta = results["runs"], results["meta"]
    bits = meta["ring_bits"]
    vs_central = []
    for n in meta["clients"]:
        for eps in meta["epsilons"]:
            central = _find(runs, arm="central", clients=n, epsilon=eps)
            skellam = _find(runs, arm="skellam", clients=n, epsilon=eps, bits_per_coordinate=bits)
            if central is None or skellam is None:
                continue
            gap = 100.0 * (skellam["final_accuracy"] - central["final_accuracy"])
            ratio = skellam["noise_over_central"]
            vs_central.append({
                "clients": n, "epsilon": eps, "difference_points": gap, "noise_over_central": ratio,
                "sem_points": _sem_points(skellam, central),
                "met": gap >= -1.0 and ratio <= 1.1,
            })  # fmt: skip
    ring = []
    for n in meta["clients"]:
        eps = meta["bits_epsilon"]
        low = _find(runs, arm="skellam", clients=n, epsilon=eps, bits_per_coordinate=bits)
        high = _find(runs, arm="skellam", clients=n, epsilon=eps, bits_per_coordinate=32)
        if low is None or high is None or bits == 32:
            continue
        gap = 100.0 * (low["final_accuracy"] - high["final_accuracy"])
        ring.append({"clients": n, "epsilon": eps, "bits": bits, "difference_points": gap,
                     "sem_points": _sem_points(low, high), "met": gap >= -0.5})  # fmt: skip
    audits = {a["arm"]: a for a in results["audit"]}
    audit_goal: dict[str, Any] = {}
    if "skellam" in audits and "none" in audits:
        dp, plain = audits["skellam"], audits["none"]
        audit_goal = {
            "skellam_lower_bound": dp["epsilon_lower_bound"],
            "skellam_claim": dp["claimed_epsilon"],
            "none_lower_bound": plain["epsilon_lower_bound"],
            "met": dp["epsilon_lower_bound"] < dp["claimed_epsilon"]
            and plain["epsilon_lower_bound"] > 0.5,
        }  # fmt: skip
    return {
        "skellam_within_1_point_and_1.1x_central": vs_central,
        "b16_within_half_point_of_b32": ring,
        "audit_below_claim_and_positive_without_dp": audit_goal,
    }


_RUN_FIELDS = ("arm", "clients", "epsilon", "rounds", "accuracy", "final_accuracy",
               "bits_per_coordinate", "bytes_per_client", "client_encode_s", "client_secagg_s",
               "server_secagg_s", "server_decode_s", "noise_over_central", "survivor_sets",
               "ledger_epsilon")  # fmt: skip
_AUDIT_FIELDS = ("arm", "canaries", "epsilon_lower_bound", "claimed_epsilon", "num_guesses",
                 "num_correct")  # fmt: skip


def check_schema(results: dict[str, Any]) -> None:
    """Raise ValueError naming the first missing field (the README rows read these)."""
    if results.get("schema") != SCHEMA:
        raise ValueError(f"schema: expected {SCHEMA!r}, found {results.get('schema')!r}")
    for key in ("meta", "runs", "audit", "goals"):
        if key not in results:
            raise ValueError(f"no field {key!r}")
    for part, fields in (("runs", _RUN_FIELDS), ("audit", _AUDIT_FIELDS)):
        for i, item in enumerate(results[part]):
            for field in fields:
                if field not in item:
                    raise ValueError(f"{part}[{i}]: no field {field!r}")


def write_results(results: dict[str, Any], path: Path) -> None:
    check_schema(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


def plot(results: dict[str, Any], path: Path) -> None:
    """Accuracy per round: one panel per (N, ε), one line per arm (and Skellam at 32 bits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta, runs = results["meta"], results["runs"]
    clients, epsilons = meta["clients"], meta["epsilons"]
    size = (3.6 * len(epsilons), 2.9 * len(clients))
    fig, axes = plt.subplots(len(clients), len(epsilons), squeeze=False, figsize=size, sharey=True)
    styles = {"central": "k-", "skellam": "C0-", "discrete-gaussian": "C1--", "none": "C2:"}
    for i, n in enumerate(clients):
        for j, eps in enumerate(epsilons):
            ax = axes[i][j]
            for run in runs:
                if run["clients"] != n or run["epsilon"] not in (eps, None):
                    continue
                label = f"{run['arm']} b={run['bits_per_coordinate']}"
                style = styles[run["arm"]]
                bits = run["bits_per_coordinate"]
                if run["arm"] == "skellam" and bits == 32 != meta["ring_bits"]:
                    style = "C3-."
                rounds = range(1, len(run["accuracy"]) + 1)
                ax.plot(rounds, run["accuracy"], style, label=label, lw=1.3)
            ax.set_title(f"N = {n}, ε = {eps:g}", fontsize=9)
            ax.set_xlabel("round", fontsize=8)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("test accuracy", fontsize=8)
    labelled: dict[str, Any] = {}
    for ax in axes.flat:
        handles, labels = ax.get_legend_handles_labels()
        labelled.update(zip(labels, handles, strict=True))
    fig.legend(handles=list(labelled.values()), labels=list(labelled), loc="lower center", ncol=5,
               fontsize=8)
    title = f"DP FedAvg, {meta['dataset']}, {meta['model']['parameters']}-parameter MLP"
    fig.suptitle(f"{title}, δ = {meta['delta']:g}, mean of {len(meta['seeds'])} seeds", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- command line


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every arm at every (N, ε), Skellam at 32 bits at ``bits_epsilon``, and the audit."""
    task = make_task(args)
    runs: list[dict[str, Any]] = []
    for n in args.clients:
        runs.append(run_arm(task, "none", n, None, 32, args.seeds))
        for eps in args.epsilons:
            for arm in ("central", *DISTRIBUTED):
                runs.append(run_arm(task, arm, n, eps, args.ring_bits, args.seeds))
            if eps == args.bits_epsilon and args.ring_bits != 32:
                runs.append(run_arm(task, "skellam", n, eps, 32, args.seeds))
    audit = [
        run_audit(task, "skellam", args.audit_clients, args.canaries, args.audit_epsilon,
                  args.ring_bits),
        run_audit(task, "none", args.audit_clients, args.canaries, None, 32),
    ]  # fmt: skip
    results: dict[str, Any] = {
        "schema": SCHEMA,
        "meta": {
            "command": "python benchmarks/dp_training.py " + " ".join(args.argv),
            "clients": args.clients, "epsilons": args.epsilons, "delta": args.delta,
            "rounds": args.rounds, "ring_bits": args.ring_bits, "bits_epsilon": args.bits_epsilon,
            "clip_norm": args.clip, "server_lr": args.server_lr, "dropout": args.dropout,
            "thresholds": {str(n): threshold_for(n) for n in args.clients},
            "dataset": "sklearn digits (8x8, not upscaled)" if args.npz is None else args.npz,
            "model": {"kind": "numpy MLP", "hidden": args.hidden, "parameters": task.model.size,
                      "local_epochs": args.epochs, "local_lr": args.lr},
            "engine": "in process: privfed.secagg.run_protocol in round 1, direct ring sums after",
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_average": list(os.getloadavg())},
            "seed": args.seed, "seeds": args.seeds,
        },
        "runs": runs,
        "audit": audit,
    }
    results["meta"]["rdp_gaussian_over_analytic"] = {
        f"{e:g}": accountant_gap(e, args.delta, args.rounds) for e in args.epsilons
    }
    results["goals"] = goals(results)
    return results


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def _seed_list(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) < 4:
        raise argparse.ArgumentTypeError("a comma-separated list of client counts >= 4")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--npz", default=None, help="MNIST-like .npz (default: sklearn digits)")
    p.add_argument("--clients", type=_ints, default=[20, 100], help="N values (default 20,100)")
    p.add_argument("--epsilons", type=_floats, default=[1.0, 3.0, 8.0])
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--rounds", type=int, default=10, help="R (default 10)")
    p.add_argument("--ring-bits", type=int, default=16, help="b of the distributed arms")
    p.add_argument("--bits-epsilon", type=float, default=3.0, help="ε of the b = 32 comparison")
    p.add_argument("--clip", type=float, default=1.0, help="C, L2 clip of an update")
    p.add_argument("--server-lr", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=0.1, help="dropouts in the protocol round")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2, help="local epochs")
    p.add_argument("--lr", type=float, default=0.3, help="local SGD step")
    p.add_argument("--canaries", type=int, default=200, help="audit canaries m")
    p.add_argument("--audit-clients", type=int, default=5, help="real clients in the audit")
    p.add_argument("--audit-epsilon", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=2026, help="data split and audit seed")
    p.add_argument("--seeds", type=_seed_list, default=None,
                   help="training seeds per arm, averaged (default: seed, seed+1, seed+2)")
    p.add_argument("--quick", action="store_true", help="tiny smoke run")
    p.add_argument("--out", type=Path, default=None)
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(raw)
    args.argv = raw
    if args.rounds < 1:
        build_parser().error("--rounds must be >= 1")
    if args.quick:
        args.clients, args.epsilons, args.rounds = [6], [3.0], 2
        args.bits_epsilon, args.hidden, args.canaries, args.audit_clients = 3.0, 8, 20, 4
    if args.seeds is None:
        args.seeds = [args.seed + i for i in range(1 if args.quick else 3)]
    if args.out is None:
        args.out = QUICK_OUT if args.quick else DEFAULT_OUT
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run_all(args)
    write_results(results, args.out)
    plot(results, args.out.with_suffix(".png"))
    print(json.dumps(results["goals"], indent=1))
    _log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
