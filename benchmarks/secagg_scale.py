"""Issue 25's scale run: active SecAgg+ at N = 1,000 .. 10,000 against honest floors.

One round per N, played in process by :func:`privfed.secagg.run_protocol`
(clients one after another, every message serialized), active mode, ``k`` and
``t`` from :func:`~privfed.secagg.parameters.find_secagg_plus_parameters` for
5 % corrupted clients and 5 % dropouts (semi-malicious server), ``corrupted``
the most that ``2t > k + 1 + n_C`` allows, 5 % of the clients dropping before
MASKED_INPUT.  Each N runs in its own child process, so its peak RSS
(``ru_maxrss``) is its own.  The benchmark asserts the exact sum.

Floors, measured in the same child right after the round, on the same
machine and vector length (the primitives the protocol must run, nothing
else):

* client floor, per client (mean over ``--floor-sample`` survivors): its
  masks (self mask + one pairwise mask per neighbour that shared keys, added
  into one vector with ``prg.add_expanded_many``), two raw X25519 agreements
  per neighbour (share-encryption and mask keys), one AEAD seal per
  neighbour (a share plaintext of the real size), and the Shamir sharing of
  its two secrets among itself and its neighbours (``shamir.split_many``);
* server floor: regenerating the survivors' self masks and the pairwise
  masks of every (dropped, surviving neighbour) pair into one vector, one raw
  X25519 agreement per such pair, and adding the survivors' vectors (the
  input sums, ``np.add`` mod 2**64).

The collector pauses that begin inside the server's timed work are reported
beside its seconds (``server_gc_seconds``, part of them): in process, every
full collection also walks the clients' objects.

The server is also timed alone: its inputs are journaled during the round
and replayed in a fresh interpreter (``server_replay.py``), which must publish
the same bytes and sum (``server_alone``).  In process, each message reaches
the server right after a client's whole step, and every collection walks the
clients' objects; a deployed server runs in a process of its own.
``--no-replay`` skips the journal, whose writes fall between the timed regions
but still touch the in-round figure.

Beside the floors (context, not part of them): the Ed25519 signing and
verifying that active mode adds, timed on this machine for the counts made.

Per-client bytes: up = what a client sends (all stages); down = what the
server sends it (mean per recipient, per stage).  At the largest N both are
compared with the vector itself plus ``O(k log N)``.

Usage::

    python benchmarks/secagg_scale.py                       # N = 1,000, 3,000, 10,000
    python benchmarks/secagg_scale.py --sizes 100 1000      # a subset (merged into the JSON)
    python benchmarks/secagg_scale.py --sizes 30000 --length 8385

Rows are merged into ``benchmarks/results/secagg_scale.json`` by (N, length),
so sizes can be run one at a time; a PNG is written beside it.  Timings on a
shared machine are provisional; the ratios to the floors are the figures.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from privfed.secagg import IdentityRegistry, RunReport, Stage, run_protocol, runner
from privfed.secagg.parameters import find_secagg_plus_parameters
from privfed.secagg.primitives import aead, keys, prg, shamir
from privfed.secagg.protocol._plaintext import _SIZE as SHARE_PLAINTEXT_SIZE
from secagg import time_signatures  # the classic suite's Ed25519 timing, one definition
from server_replay import Journal

RESULTS = Path(__file__).resolve().parent / "results"
OUTPUT = RESULTS / "secagg_scale.json"
PAYLOAD = 10 * (128 + 128 * 129 // 2 + 1)  # 83,850 values: 10 classes at d = 128
SIZES = (1000, 3000, 10_000)


class LazyInputs(Sequence[np.ndarray]):
    """Client vectors regenerated on demand (never all in memory)."""

    def __init__(self, n: int, length: int, seed: int) -> None:
        self._n, self._length, self._seed = n, length, seed

    def __len__(self) -> int:
        return self._n

    @property
    def length(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> np.ndarray:  # type: ignore[override]
        if not 0 <= index < self._n:
            raise IndexError(index)
        rng = np.random.default_rng([self._seed, index])
        return rng.integers(0, 2**64 - 1, size=self._length, dtype=np.uint64, endpoint=True)


def parameters(n: int) -> tuple[int, int, int]:
    """``(k, t, corrupted)``: the finder's choice for 5 % corrupted, 5 % dropouts."""
    p = find_secagg_plus_parameters(
        n, corrupted_fraction=0.05, dropout_fraction=0.05, threat_model="semi-malicious"
    )
    return p.degree, p.threshold, 2 * p.threshold - p.degree - 2


def rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def deep_size(root: object) -> int:
    """Bytes of the objects reachable from ``root`` (``sys.getsizeof``; types, modules skipped).

    A numpy array that owns its data counts it; a view counts through its base.
    """
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, np.ndarray) and obj.base is not None:
            stack.append(obj.base)
        stack.extend(gc.get_referents(obj))
    return total


class ServerProbe:
    """Captures the round's server (benchmark only) to weigh what it holds at each stage end."""

    def __init__(self) -> None:
        self.server: object | None = None
        self.held: dict[str, int] = {}
        self.seconds = 0.0  # outside every timed region, but inside the round's wall
        self._original = runner.SecAggServer

    def __enter__(self) -> ServerProbe:
        def make(*args: Any, **kwargs: Any) -> object:
            self.server = self._original(*args, **kwargs)
            return self.server

        runner.SecAggServer = make  # type: ignore[assignment,misc]
        return self

    def __exit__(self, *_: object) -> None:
        runner.SecAggServer = self._original  # type: ignore[misc]

    def weigh(self, stage: str) -> None:
        if self.server is not None:
            start = time.perf_counter()
            self.held[stage] = deep_size(self.server)
            self.seconds += time.perf_counter() - start


class ServerGC:
    """Collector pauses inside the server's timed regions (benchmark only; reported, not removed).

    The round runs in one process, so every full collection also walks the N
    in-process clients' objects; a pause counts here when it starts while the
    runner times server work (receiving a message or closing a stage).  The
    server's seconds still include these pauses: this says how much of them
    is the collector's.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._inside = False
        self._start: float | None = None
        self._originals = (runner._Round._server_receive, runner._Round.server_close)

    def __enter__(self) -> ServerGC:
        receive, close = self._originals

        def timed_receive(round_: Any, *args: Any, **kwargs: Any) -> Any:
            self._inside = True
            try:
                return receive(round_, *args, **kwargs)
            finally:
                self._inside = False

        def timed_close(round_: Any, *args: Any, **kwargs: Any) -> Any:
            self._inside = True
            try:
                return close(round_, *args, **kwargs)
            finally:
                self._inside = False

        runner._Round._server_receive = timed_receive  # type: ignore[method-assign]
        runner._Round.server_close = timed_close  # type: ignore[method-assign]
        gc.callbacks.append(self._pause)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._pause)
        runner._Round._server_receive, runner._Round.server_close = self._originals  # type: ignore[method-assign]

    def _pause(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter() if self._inside else None
        elif self._start is not None:
            self.seconds += time.perf_counter() - self._start
            self.collections[info["generation"]] += 1
            self._start = None


class Log:
    """Progress lines (stage, done/total, elapsed) to stderr, at most every few seconds."""

    def __init__(self, label: str, probe: ServerProbe | None = None) -> None:
        self.label, self.start, self.last = label, time.monotonic(), 0.0
        self.probe = probe

    def __call__(self, event: Any) -> None:
        now = time.monotonic()
        if event.finished and self.probe is not None:
            self.probe.weigh(event.stage)
        if event.finished or now - self.last > 10:
            self.last = now
            print(
                f"[{self.label} +{now - self.start:7.1f}s] {event.stage} {event.done}/{event.total}"
                f" rss {rss_mib():.0f} MiB",
                file=sys.stderr,
                flush=True,
            )


# -- floors ------------------------------------------------------------------------------


def _seeds(count: int) -> list[tuple[bytes, bool]]:
    return [(secrets.token_bytes(prg.SEED_SIZE), bool(i % 2)) for i in range(count)]


def time_masks(count: int, length: int) -> float:
    """Seconds to add ``count`` fresh masks into one ``length``-vector (the mask floor)."""
    masks = _seeds(count)
    out = np.zeros(length, dtype=np.uint64)
    start = time.perf_counter()
    prg.add_expanded_many(out, masks)
    return time.perf_counter() - start


def time_agreements(count: int) -> float:
    """Seconds for ``count`` raw X25519 agreements (fresh key, fresh peers)."""
    pair = keys.KeyPair.generate()
    peers = [keys.KeyPair.generate().public_key for _ in range(count)]
    start = time.perf_counter()
    for peer in peers:
        pair.agree(peer)
    return time.perf_counter() - start


def time_seals(count: int) -> float:
    """Seconds for ``count`` AEAD seals of one share plaintext each (real size and AD)."""
    key = secrets.token_bytes(32)
    plaintext = secrets.token_bytes(SHARE_PLAINTEXT_SIZE)
    ads = [
        aead.share_associated_data(session_id=b"s" * 32, round_index=0, sender=1, recipient=r + 2)
        for r in range(count)
    ]
    start = time.perf_counter()
    for ad in ads:
        aead.seal(key, plaintext, associated_data=ad)
    return time.perf_counter() - start


def time_sharing(peers: int, threshold: int) -> float:
    """Seconds to Shamir-share two 32-byte secrets among a client and ``peers`` others."""
    values = (secrets.token_bytes(32), secrets.token_bytes(32))
    holders = list(range(1, peers + 2))
    start = time.perf_counter()
    shamir.split_many(values, threshold=threshold, holders=holders)
    return time.perf_counter() - start


def client_floor(report: RunReport, length: int, threshold: int, sample: int) -> dict[str, float]:
    """The client floor's parts, mean over ``sample`` survivors spread over the ids."""
    shared, survivors = set(report.shared), sorted(report.survivors)
    hood = report.config.neighbourhoods(report.graph_seed)
    picked = survivors[:: max(1, len(survivors) // sample)][:sample]
    parts: dict[str, list[float]] = {"masks": [], "agreements": [], "aead": [], "shamir": []}
    for u in picked:
        peers = len(hood[u])  # neighbours on the roster (all advertised here)
        parts["masks"].append(time_masks(len(hood[u] & shared) + 1, length))
        parts["agreements"].append(time_agreements(2 * peers))
        parts["aead"].append(time_seals(peers))
        parts["shamir"].append(time_sharing(peers, threshold))
    out = {name: float(np.mean(values)) for name, values in parts.items()}
    out["total"] = sum(out.values())
    return out


def server_floor(report: RunReport, inputs: LazyInputs) -> dict[str, float]:
    """The server floor's parts: mask regeneration, dropped-pair agreements, input sums."""
    shared, survivors = set(report.shared), set(report.survivors)
    hood = report.config.neighbourhoods(report.graph_seed)
    pairs = sum(len(hood[v] & survivors) for v in shared - survivors)
    out = {
        "masks": time_masks(len(survivors) + pairs, inputs.length),
        "agreements": time_agreements(pairs),
    }
    total = np.zeros(inputs.length, dtype=np.uint64)
    seconds = 0.0
    for i in sorted(survivors):
        row = inputs[i - 1]
        start = time.perf_counter()
        np.add(total, row, out=total)
        seconds += time.perf_counter() - start
    out["input_sums"] = seconds
    out["total"] = sum(out.values())
    out["regenerated_masks"] = float(len(survivors) + pairs)
    out["dropped_pairs"] = float(pairs)
    return out


def time_reconstruction(owners: int, threshold: int) -> float:
    """Seconds to rebuild ``owners`` secrets from ``threshold`` shares each, own holder sets.

    The share indices are client ids, as in the round: each secret's holders
    are ``threshold`` distinct ids drawn from ``[1, owners]`` (rows written
    before 2026-12-08 drew them from ``[1, 4 * threshold]``: smaller ints, whose
    Lagrange products are cheaper than the round's at large N).
    """
    rng = np.random.default_rng(owners)
    batches = []
    for _ in range(owners):
        xs = sorted(rng.choice(np.arange(1, owners + 1), threshold, replace=False).tolist())
        shares = shamir.split(
            secrets.token_bytes(32), threshold=threshold, num_shares=threshold, indices=xs
        )
        batches.append((tuple(xs), [[share.value for share in shares]]))
    start = time.perf_counter()
    shamir.combine_batches(batches, threshold=threshold)
    return time.perf_counter() - start


def add_context(row: dict[str, Any]) -> None:
    """Primitives active SecAgg+ also needs beyond the floors, timed here (context).

    Client: its Ed25519 signing and verifying (timed in the child for the mean
    counts made).  Server: one Ed25519 verification per advertisement, per
    committee member's reveal (the graph-seed round) and per survivor's
    consistency signature, and the Shamir reconstruction of every
    survivor's self-mask seed and every dropped client's mask key (``t``
    shares each, one holder set per owner).  Rows written before this existed
    get it timed by the parent process, after the round (``context_timed_in``).
    """
    if "context" in row:
        return
    n, dropped, t = row["clients"], row["dropped"], row["threshold"]
    verified = n + row["committee_members"] + (n - dropped)
    verifies = time_signatures(0, verified)
    rebuild = time_reconstruction(n, t)
    client_total = row["client_floor"]["total"] + row["client_signature_seconds"]
    server_total = row["server_floor"]["total"] + verifies + rebuild
    row["context"] = {
        "timed_in": "parent",
        "server_signatures_verified": verified,
        "server_signature_seconds": verifies,
        "server_reconstruction_seconds": rebuild,
        "client_floor_plus_signatures": client_total,
        "client_over_floor_plus_signatures": row["client_seconds"] / client_total,
        "server_floor_plus_signatures_and_reconstruction": server_total,
        "server_over_floor_plus_signatures_and_reconstruction": row["server_seconds"]
        / server_total,
    }
    if "server_alone" in row:
        row["context"]["server_alone_over_floor_plus_signatures_and_reconstruction"] = (
            row["server_alone"]["server_seconds"] / server_total
        )


# -- one N (child process) -------------------------------------------------------------


def _identity_sizes(report: RunReport, sample: int) -> dict[str, float]:
    """What an active client pins and downloads for its peers' identity keys.

    The registry file (what a node held before the identity root), the root
    and an enrolment file (what it may hold now), and the identity section of
    a roster part (keys of the part's entries and of the committee, with
    their multiproof), as a mean over ``sample`` clients.
    """
    registry = report.config.identities
    if not isinstance(registry, IdentityRegistry) or report.graph_seed is None:
        return {}
    committee = sorted(report.committee)
    ids = list(registry.public_keys)[:: max(1, len(registry.public_keys) // sample)][:sample]
    sets = [
        sorted(report.config.neighbours(c, report.graph_seed) | {c} | set(committee)) for c in ids
    ]
    sections = [12 + 40 * len(items) + 32 * len(h) for items, h in registry.key_proofs(sets)]
    return {
        "registry_file_bytes": len(registry.to_json()),
        "root_file_bytes": len(registry.commitment.to_json()),
        "enrolment_file_bytes": float(np.mean([len(registry.enrolment(c).to_json()) for c in ids])),
        "roster_identity_section_bytes": float(np.mean(sections)),
    }


def _bytes_down(report: RunReport) -> dict[str, float]:
    """Mean bytes the server sent each recipient, per stage that published."""
    ran = {stage: sum(1 for c in report.clients if stage in c.seconds) for stage in Stage}
    following = list(report.stages)
    out = {}
    for stage, sent in report.server_bytes_sent.items():
        after = following.index(stage) + 1
        # The last stage publishes nothing; a stage's messages go to the next one's players.
        recipients = ran[following[after]] if after < len(following) else len(report.survivors)
        out[stage.name] = sent / max(1, recipients)
    return out


def run_child(
    n: int, length: int, seed: int, sample: int, *, replay: bool = True
) -> dict[str, Any]:
    """One active round at ``n`` clients and its floors, in this process.

    With ``replay``, the round's server inputs are journaled (written between
    the timed regions, so the in-round server figure carries that traffic:
    +3-14 % at N = 1,000 in alternating runs on 2026-12-08) and the server is
    timed again alone from the journal.
    """
    k, t, nc = parameters(n)
    inputs = LazyInputs(n, length, seed)
    rng = np.random.default_rng(seed)
    dropped = sorted(rng.choice(n, size=n // 20, replace=False).tolist())
    rss_before = rss_mib()
    start = time.perf_counter()
    journal_dir = tempfile.TemporaryDirectory(prefix="secagg_scale_")
    journal_path = Path(journal_dir.name) / "server.journal"
    journal = Journal(journal_path)
    with ServerProbe() as probe, ServerGC() as server_gc, journal if replay else nullcontext():
        report = run_protocol(
            inputs,
            threshold=t,
            dropouts={Stage.MASKED_INPUT: dropped},
            graph="harary",
            degree=k,
            progress=Log(f"N={n}", probe),
            mode="active",
            corrupted=nc,
        )
    wall = time.perf_counter() - start
    probe_seconds = probe.seconds
    rss_round = rss_mib()
    expected = np.zeros(length, dtype=np.uint64)
    gone = set(dropped)
    for i in range(n):
        if i not in gone:
            np.add(expected, inputs[i], out=expected)
    exact = bool(np.array_equal(report.total, expected))
    if not exact:
        raise SystemExit(f"N={n}: the round's sum is not the exact sum of the survivors")
    print(f"[N={n}] round done in {wall:.1f} s, exact sum; server alone ...", file=sys.stderr)
    alone = replayed(journal_path, journal, report.total) if replay else None
    journal_dir.cleanup()
    print(f"[N={n}] floors ...", file=sys.stderr)
    cfloor = client_floor(report, length, t, sample)
    sfloor = server_floor(report, inputs)
    full = [c for c in report.clients if len(c.seconds) == len(report.stages)]
    made = float(np.mean([c.signatures_made for c in full]))
    verified = float(np.mean([c.signatures_verified for c in full]))
    up = {s.name: float(np.mean([c.bytes_sent[s] for c in full])) for s in report.stages}
    down = _bytes_down(report)
    client_s = report.mean_client_seconds
    server_s = report.total_server_seconds
    return {
        "clients": n,
        "degree": k,
        "threshold": t,
        "corrupted": nc,
        # Active SecAgg+: the graph-seed committee (the config's default for n_C / s).
        "committee_size": report.config.committee_size,
        "committee_members": len(report.committee),
        "dropped": len(dropped),
        "length": length,
        "exact_sum": exact,
        "wall_seconds": wall,
        "client_seconds": client_s,
        "client_seconds_per_stage": {
            s.name: float(np.mean([c.seconds[s] for c in full])) for s in report.stages
        },
        "client_floor": cfloor,
        "client_over_floor": client_s / cfloor["total"],
        "client_signature_seconds": time_signatures(made, verified),
        "signatures_made_per_client": made,
        "signatures_verified_per_client": verified,
        "server_seconds": server_s,
        "server_seconds_per_stage": {s.name: v for s, v in report.server_seconds.items()},
        "server_floor": sfloor,
        "server_over_floor": server_s / sfloor["total"],
        # The same server work, replayed alone in a fresh process (server_replay.py).
        **(
            {
                "server_alone": alone,
                "server_alone_over_floor": alone["server_seconds"] / sfloor["total"],
            }
            if alone is not None
            else {}
        ),
        # Part of server_seconds: collector pauses begun in the server's timed work.
        "server_gc_seconds": server_gc.seconds,
        "server_gc_collections": server_gc.collections,
        "client_bytes_up": up,
        "client_bytes_down": down,
        "client_bytes_up_total": sum(up.values()),
        "client_bytes_down_total": sum(down.values()),
        "vector_bytes": 8 * length,
        "peak_rss_mib": rss_round,
        "server_held_bytes_per_stage": probe.held,
        "server_held_bytes_max": max(probe.held.values(), default=0),
        "server_weighing_seconds": probe_seconds,
        "rss_before_round_mib": rss_before,
        "identity": _identity_sizes(report, sample),
        "commit": _commit(),
    }


def replayed(path: Path, journal: Journal, total: np.ndarray) -> dict[str, Any]:
    """The round's server, replayed from its journal alone in a fresh interpreter.

    The replay must publish what the round's server published, byte for
    byte, and the same sum: otherwise it did other work and its time says
    nothing (exit).
    """
    out = path.with_suffix(".json")
    script = Path(__file__).resolve().with_name("server_replay.py")
    done = subprocess.run([sys.executable, str(script), str(path), str(out)], check=False)
    if done.returncode != 0:
        raise SystemExit(f"the server replay failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(out.read_text())
    same_sum = result.pop("sum_digest") == hashlib.sha256(total.tobytes()).hexdigest()
    if result.pop("digest") != journal.digest.hexdigest() or not same_sum:
        raise SystemExit("the replayed server published other bytes than the round's server")
    result["journal_events"] = journal.events
    result["published_same_bytes"] = True
    return result


def _commit() -> str | None:
    """The checkout's commit (short), so rows merged from runs on other code say so."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


# -- the parent: one child per N, fits, JSON, plot -----------------------------------------


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) on log(x) (None with fewer than two points)."""
    if len(xs) < 2 or not all(np.isfinite(ys)):
        return None
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def exponents(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Growth exponents over the full-vector rows with N >= 1,000."""
    use = sorted(
        (r for r in rows if r["length"] == PAYLOAD and r["clients"] >= 1000),
        key=lambda r: r["clients"],
    )
    ns = [float(r["clients"]) for r in use]
    pick = {
        "client_seconds": lambda r: r["client_seconds"],
        "client_floor": lambda r: r["client_floor"]["total"],
        "client_bytes_up": lambda r: r["client_bytes_up_total"],
        "client_bytes_down": lambda r: r["client_bytes_down_total"],
        "server_seconds": lambda r: r["server_seconds"],
        "server_floor": lambda r: r["server_floor"]["total"],
        "server_peak_rss_mib": lambda r: r["peak_rss_mib"],
        "server_rss_growth_mib": lambda r: max(1e-3, r["peak_rss_mib"] - r["rss_before_round_mib"]),
    }
    out: dict[str, Any] = {"clients": [int(n) for n in ns]}
    for name, get in pick.items():
        out[name] = slope(ns, [get(r) for r in use])
    held = [r for r in use if r.get("server_held_bytes_max")]
    out["server_held_bytes"] = slope(
        [float(r["clients"]) for r in held], [r["server_held_bytes_max"] for r in held]
    )
    out["server_held_bytes_clients"] = [r["clients"] for r in held]
    # The server replayed alone (server_replay.py), over the rows that have it.
    alone = [r for r in use if "server_alone" in r]
    out["server_alone_seconds"] = slope(
        [float(r["clients"]) for r in alone], [r["server_alone"]["server_seconds"] for r in alone]
    )
    out["server_alone_clients"] = [r["clients"] for r in alone]
    stages = use[0]["server_seconds_per_stage"] if use else {}
    out["server_per_stage"] = {
        s: slope(ns, [r["server_seconds_per_stage"][s] for r in use]) for s in stages
    }
    return out


def bytes_check(row: dict[str, Any]) -> dict[str, float]:
    """Per-client bytes against the vector itself (the O(k log N) rest is the excess)."""
    vector = row["vector_bytes"]
    up, down = row["client_bytes_up_total"], row["client_bytes_down_total"]
    k, n = row["degree"], row["clients"]
    klogn = k * np.log2(n)
    return {
        "vector_bytes": vector,
        "up_over_vector": up / vector,
        "down_over_vector": down / vector,
        "up_minus_vector_bytes": up - vector,
        "up_minus_vector_over_k_log2_n": (up - vector) / klogn,
        "down_over_k_log2_n": down / klogn,
        "up_plus_down_over_vector": (up + down) / vector,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'N':>6} {'k':>3} {'t':>3} {'len':>6} | {'client s':>8} {'floor':>7} {'x':>5} | "
        f"{'up B':>9} {'down B':>7} | {'server s':>8} {'floor':>7} {'x':>5} | {'RSS MiB':>7} | "
        f"{'c x+sig':>7} {'s x+sig+shamir':>14} | {'alone s':>7} {'x+sig+shamir':>12}"
    )
    print(head)
    print("-" * len(head))
    for r in sorted(rows, key=lambda r: (r["length"], r["clients"])):
        print(
            f"{r['clients']:>6} {r['degree']:>3} {r['threshold']:>3} {r['length']:>6} | "
            f"{r['client_seconds']:>8.4f} {r['client_floor']['total']:>7.4f} "
            f"{r['client_over_floor']:>5.2f} | {r['client_bytes_up_total']:>9,.0f} "
            f"{r['client_bytes_down_total']:>7,.0f} | {r['server_seconds']:>8.2f} "
            f"{r['server_floor']['total']:>7.2f} {r['server_over_floor']:>5.2f} | "
            f"{r['peak_rss_mib']:>7.0f} | "
            f"{r['context']['client_over_floor_plus_signatures']:>7.2f} "
            f"{r['context']['server_over_floor_plus_signatures_and_reconstruction']:>14.2f} | "
            + (
                f"{r['server_alone']['server_seconds']:>7.2f} "
                f"{r['context']['server_alone_over_floor_plus_signatures_and_reconstruction']:>12.2f}"
                if "server_alone" in r
                else f"{'-':>7} {'-':>12}"
            )
        )


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Client and server seconds against their floors, and peak RSS, against N."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    use = sorted((r for r in rows if r["length"] == PAYLOAD), key=lambda r: r["clients"])
    if not use:
        return False
    ns = [r["clients"] for r in use]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = (
        ("client seconds", "client_seconds", lambda r: r["client_floor"]["total"]),
        ("server seconds", "server_seconds", lambda r: r["server_floor"]["total"]),
    )
    for ax, (title, key, floor) in zip(axes[:2], panels, strict=True):
        ax.plot(ns, [r[key] for r in use], "o-", label="privfed (active SecAgg+)")
        ax.plot(ns, [floor(r) for r in use], "s--", label="floor (primitives only)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("clients N")
        ax.set_title(title)
        ax.legend(fontsize=8)
    axes[2].plot(ns, [r["peak_rss_mib"] for r in use], "o-", label="peak RSS (whole process)")
    axes[2].plot(
        ns,
        [r["peak_rss_mib"] - r["rss_before_round_mib"] for r in use],
        "s--",
        label="growth during the round",
    )
    held = [r for r in use if r.get("server_held_bytes_max")]
    if held:
        axes[2].plot(
            [r["clients"] for r in held],
            [r["server_held_bytes_max"] / 2**20 for r in held],
            "^:",
            label="held by the server (largest stage end)",
        )
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("clients N")
    axes[2].set_title("memory, MiB")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"issue 25 scale run: {PAYLOAD:,} values, 5 % dropouts, finder's k, t")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _load(path: Path, key: str = "rows") -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError:
        return []
    rows = document.get(key)
    return rows if isinstance(rows, list) else []


def _replace(
    rows: list[dict[str, Any]], new: list[dict[str, Any]], earlier: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``rows`` with ``new`` in place of the same (N, length) rows; those go to ``earlier``."""
    keys = {(r["clients"], r["length"]) for r in new}
    earlier += [r for r in rows if (r["clients"], r["length"]) in keys]
    return [r for r in rows if (r["clients"], r["length"]) not in keys] + new


def write(
    rows: list[dict[str, Any]], path: Path, command: str, earlier: list[dict[str, Any]]
) -> None:
    for row in rows:
        add_context(row)
    largest = max(
        (r for r in rows if r["length"] == PAYLOAD), key=lambda r: r["clients"], default=None
    )
    document = {
        "meta": {
            "command": command,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "note": (
                "one active round per N, in its own child process (peak RSS is that "
                "process's ru_maxrss: the server and all N in-process clients together, an "
                "upper bound on the server's); floors measured in the same child right after "
                "the round; shared 2-core machine, timings provisional"
            ),
        },
        "rows": sorted(rows, key=lambda r: (r["length"], r["clients"])),
        "exponents": exponents(rows),
        "bytes_at_largest_n": bytes_check(largest) if largest else None,
        # Rows a later run of the same (N, length) replaced, kept for comparison.
        "earlier_runs": earlier,
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--length", type=int, default=PAYLOAD, help="values per vector")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor-sample", type=int, default=10)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument(
        "--merge", type=Path, nargs="*", default=[], help="also take the rows of these JSON files"
    )
    parser.add_argument(
        "--no-replay",
        action="store_true",
        help="do not journal the server's inputs nor time it again alone (server_replay.py)",
    )
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:  # one N, in this (child) process
        row = run_child(
            args.sizes[0], args.length, args.seed, args.floor_sample, replay=not args.no_replay
        )
        add_context(row)
        row["context"]["timed_in"] = "child"
        args.child.write_text(json.dumps(row, indent=2) + "\n")
        return 0
    rows, earlier = _load(args.output), _load(args.output, "earlier_runs")
    for other in args.merge:
        rows = _replace(rows, _load(other), earlier)
    if not args.sizes:  # merge (or only re-fit) what is there
        write(rows, args.output, "python benchmarks/secagg_scale.py (merged runs)", earlier)
        print_table(rows)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        part = args.output.with_name(f".{args.output.stem}_{n}_{args.length}.json")
        command = [sys.executable, __file__, "--child", str(part), "--sizes", str(n)]
        command += ["--length", str(args.length), "--seed", str(args.seed)]
        command += ["--floor-sample", str(args.floor_sample)]
        command += ["--no-replay"] if args.no_replay else []
        print(f"running N={n}, {args.length} values ...", file=sys.stderr, flush=True)
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            print(f"N={n} failed (exit {done.returncode})", file=sys.stderr)
            return 1
        row = json.loads(part.read_text())
        part.unlink()
        rows = _replace(rows, [row], earlier)
        command = "python benchmarks/secagg_scale.py " + " ".join(argv or sys.argv[1:])
        write(rows, args.output, command, earlier)
        print_table(rows)
    png = args.output.with_suffix(".png")
    if plot(rows, png):
        print(f"wrote {args.output} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
