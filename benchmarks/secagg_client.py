"""One secure-aggregation client's time, stage by stage, against the floors it cannot beat.

Plays whole rounds of the classic scenario of ``benchmarks/secagg.py``
(N = 100 clients, complete graph, t = 51, 83,850 values, 10 clients dropping
before masked input, semi-honest) with a real server and every message
serialized, like :func:`privfed.secagg.run_protocol`, and times each
surviving client's stages the way the runner does (parsing what the client
receives and serializing what it sends included).  Right after every tenth
client it measures, in the same process:

* the *mask floor* of ``benchmarks/secagg.py``: ``prg.expand`` of as many
  masks as a client adds (its pairwise masks plus its self mask);
* the same number of keystreams from OpenSSL's plain CTR mode (how
  ``prg.expand`` computed them before issue 15, and the "AES-CTR keystream"
  the issue's goal was set against); the bytes are the same, see
  :mod:`privfed.secagg.primitives.prg`;
* the ``2 (N - 1)`` X25519 agreements the protocol makes a client run (one
  per peer with its encryption key, one with its mask key): a client can be
  no faster than the masks plus these, whatever else it does.

Every timing is taken as wall-clock and as process CPU time (``--clock``
picks the one the table shows; on a shared machine CPU time is the steadier),
and the table gives medians over clients and over ``--repeats`` rounds; the
sum the server reconstructs is checked against the plain sum.

    python benchmarks/secagg_client.py [--repeats 3] [--clock cpu|wall]

Writes ``benchmarks/results/secagg_client.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from privfed.secagg import SecAggConfig
from privfed.secagg.primitives import prg
from privfed.secagg.protocol.client import SecAggClient
from privfed.secagg.protocol.config import new_session_id
from privfed.secagg.protocol.messages import (
    EncryptedSharesBundle,
    Roster,
    RoutedShares,
    UnmaskRequest,
    decode_message,
)
from privfed.secagg.protocol.server import SecAggServer

RESULTS = Path(__file__).resolve().parent / "results"
PAYLOAD = 10 * (128 + 128 * 129 // 2 + 1)  # 83,850 values, as in benchmarks/secagg.py
STAGES = ("SHARE_KEYS", "MASKED_INPUT", "UNMASKING", "ADVERTISE_KEYS")
_T = TypeVar("_T")


class Clock:
    """Wall-clock and CPU seconds of the timed calls, accumulated per key."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def time(self, key: str, call: Callable[[], _T]) -> _T:
        w, c = time.perf_counter(), time.process_time()
        out = call()
        self.cpu[key] = self.cpu.get(key, 0.0) + time.process_time() - c
        self.wall[key] = self.wall.get(key, 0.0) + time.perf_counter() - w
        return out


def floors(masks: int, length: int, agreements: int) -> dict[str, dict[str, float]]:
    """Seconds for ``masks`` expansions (two engines) and ``agreements`` X25519 exchanges."""
    seeds = [secrets.token_bytes(32) for _ in range(masks)]
    zeros = bytes(8 * length)
    iv = bytes(16)
    key = X25519PrivateKey.generate()
    peers = [X25519PrivateKey.generate().public_key() for _ in range(agreements)]

    def expand() -> None:
        for seed in seeds:
            prg.expand(seed, length)

    def ctr_mode() -> None:
        for seed in seeds:
            Cipher(algorithms.AES(seed), modes.CTR(iv)).encryptor().update(zeros)

    def x25519() -> None:
        for peer in peers:
            key.exchange(peer)

    clock = Clock()
    for name, call in (("expand", expand), ("ctr_mode", ctr_mode), ("x25519", x25519)):
        clock.time(name, call)
    return {"wall": clock.wall, "cpu": clock.cpu}


def play_round(n: int, threshold: int, length: int, dropouts: int, seed: int) -> dict[str, Any]:
    """One round; per-client stage times and the floors measured between clients."""
    rng = np.random.default_rng(seed)
    dropped = {int(i) + 1 for i in rng.choice(n, size=dropouts, replace=False)}
    ids = tuple(range(1, n + 1))
    config = SecAggConfig(
        client_ids=ids, threshold=threshold, vector_length=length, session_id=new_session_id()
    )
    clients = {i: SecAggClient(config, i) for i in ids}
    server = SecAggServer(config)
    clocks = {i: Clock() for i in ids}
    measured: list[dict[str, dict[str, float]]] = []
    masks = n  # n - 1 pairwise masks (every peer shared keys) plus the self mask

    for i in ids:
        message = clocks[i].time(
            "ADVERTISE_KEYS", lambda i=i: clients[i].advertise_keys().to_bytes()
        )
        server.receive(decode_message(message), sender=i)
    roster = server.roster().to_bytes()
    for i in ids:

        def share(i: int = i) -> bytes:
            out = clients[i].share_keys(Roster.from_bytes(roster))
            return EncryptedSharesBundle.from_shares([out[r] for r in sorted(out)]).to_bytes()

        server.receive(decode_message(clocks[i].time("SHARE_KEYS", share)), sender=i)
    routed = {cid: m.to_bytes() for cid, m in server.routed_shares().items()}
    expected = np.zeros(length, dtype=np.uint64)
    done = 0
    for i in ids:
        if i in dropped:
            continue
        values = np.random.default_rng([seed, i]).integers(0, 2**64 - 1, length, np.uint64, True)
        expected += values

        def mask(i: int = i, values: np.ndarray = values) -> bytes:
            return clients[i].masked_input(RoutedShares.from_bytes(routed[i]), values).to_bytes()

        server.receive(decode_message(clocks[i].time("MASKED_INPUT", mask)), sender=i)
        done += 1
        if done % 10 == 0:
            measured.append(floors(masks, length, 2 * (n - 1)))
        print(f"\r  masked input {done}/{n - dropouts}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    requests = {cid: m.to_bytes() for cid, m in server.unmask_requests().items()}
    for i in ids:
        if i in dropped:
            continue

        def unmask(i: int = i) -> bytes:
            return clients[i].unmask(UnmaskRequest.from_bytes(requests[i])).to_bytes()

        server.receive(decode_message(clocks[i].time("UNMASKING", unmask)), sender=i)
    total = server.finalize()
    survivors = [clocks[i] for i in ids if i not in dropped]
    out: dict[str, Any] = {"exact_sum": bool(np.array_equal(total, expected))}
    for kind in ("wall", "cpu"):
        per_client = [getattr(c, kind) for c in survivors]
        out[kind] = {
            "client_seconds": statistics.median(sum(t.values()) for t in per_client),
            "stages": {s: statistics.median(t[s] for t in per_client) for s in STAGES},
            **{
                f"{name}_floor_seconds": statistics.median(f[kind][name] for f in measured)
                for name in ("expand", "ctr_mode", "x25519")
            },
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="table's clock")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--threshold", type=int, default=51)
    parser.add_argument("--length", type=int, default=PAYLOAD)
    parser.add_argument("--dropouts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "secagg_client.json")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    load_before = os.getloadavg()
    rounds = []
    for r in range(args.repeats):
        print(f"round {r + 1}/{args.repeats}", file=sys.stderr)
        rounds.append(
            play_round(args.clients, args.threshold, args.length, args.dropouts, args.seed + r)
        )
    summary: dict[str, Any] = {}
    for kind in ("wall", "cpu"):
        rows = [r[kind] for r in rounds]

        def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
            return float(statistics.median(row[key] for row in rows))

        client, expand_floor = med("client_seconds"), med("expand_floor_seconds")
        ctr_floor, x25519 = med("ctr_mode_floor_seconds"), med("x25519_floor_seconds")
        summary[kind] = {
            "client_seconds": client,
            "client_seconds_per_stage": {
                s: float(statistics.median(row["stages"][s] for row in rows)) for s in STAGES
            },
            "expand_floor_seconds": expand_floor,
            "ctr_mode_floor_seconds": ctr_floor,
            "x25519_seconds": x25519,
            "client_over_expand_floor": client / expand_floor,
            "client_over_ctr_mode_floor": client / ctr_floor,
            "lower_bound_over_expand_floor": (expand_floor + x25519) / expand_floor,
        }
    s = summary[args.clock]
    print(
        f"N={args.clients} complete, t={args.threshold}, {args.length:,} values, "
        f"{args.dropouts} dropping before masked input; medians over clients and "
        f"{args.repeats} rounds, {args.clock} time"
    )
    print(f"  client, all stages      {s['client_seconds'] * 1e3:8.2f} ms")
    for stage, seconds in s["client_seconds_per_stage"].items():
        print(f"    {stage:<20} {seconds * 1e3:8.2f} ms")
    print(
        f"  floor: prg.expand       {s['expand_floor_seconds'] * 1e3:8.2f} ms "
        f"-> client {s['client_over_expand_floor']:.2f}x"
    )
    print(
        f"  plain CTR-mode keystream{s['ctr_mode_floor_seconds'] * 1e3:8.2f} ms "
        f"-> client {s['client_over_ctr_mode_floor']:.2f}x"
    )
    print(
        f"  {2 * (args.clients - 1)} X25519 agreements  {s['x25519_seconds'] * 1e3:8.2f} ms "
        f"-> masks + agreements alone: {s['lower_bound_over_expand_floor']:.2f}x the floor"
    )
    exact = all(r["exact_sum"] for r in rounds)
    print(f"  exact sum: {'yes' if exact else 'NO'}")
    document = {
        "meta": {
            "command": "python benchmarks/secagg_client.py"
            + ("" if args.repeats == 3 else f" --repeats {args.repeats}"),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "scenario": {
                "clients": args.clients,
                "threshold": args.threshold,
                "length": args.length,
                "dropouts": args.dropouts,
                "graph": "complete",
                "mode": "semi-honest",
            },
        },
        "exact_sum": exact,
        "summary": summary,
        "rounds": rounds,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
