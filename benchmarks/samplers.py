"""Speed of the exact distributed-DP noise samplers, the new against the old, in one run.

Two parts:

1. **Samplers/second** of :func:`privfed.dp.samplers.exact_discrete_gaussian` (σ) and
   :func:`privfed.dp.samplers.skellam_noise` (λ = σ²/2, the same variance), σ in
   {1, 10, 1000}, d in {10^5, 10^6} draws per call, the table already built (a client
   draws every round from the same tables); plus the cold cost of building a table.
   "old" is the previous implementation, read from git at commit
   :data:`OLD_REVISION` (rejection from the same exact envelope, but a
   modular uniform per proposal, a binary search per proposal and a separate sign word);
   "new" is the package's.  Both are exact; their streams differ.
2. **A training client's round**: its noise (Skellam, layer 0 plus ``L = n − t``
   secret-shared layers; and Skellam or discrete Gaussian without layers; d
   coordinates, tables warm as from round 2 on) against its
   secure-aggregation work in the same round (``run_protocol``'s mean client seconds,
   masks with every peer, the layer seeds shared), n = 20, t = 11, b = 32.  The noise
   share of (noise + secure aggregation) bounds the share of the whole client-side
   privacy work from above (clipping, rotation and rounding only add to it).
   Goal: <= 10 %.
3. **A one-shot latent client** (section 2 of ``benchmarks/distributed_dp.py``, run
   here by its own ``cost_part``: 20 clients, d = 8 and 32, tables built cold per
   client): with the old module swapped in for the block samplers, then the new.

    python benchmarks/samplers.py [--dims 100000 1000000] [--sigmas 1 10 1000]
        [--repeats 3] [--round-dims 100000] [--latent-dims 8 32] [--no-old]

Prints a table per part and writes benchmarks/results/samplers.json.  Times are the
minimum over ``--repeats`` (wall clock and process CPU); the machine's load average is
recorded with them, since the benchmark machine is shared.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


#: The last commit of ``privfed/dp/samplers.py`` before the guide-table sampler.
OLD_REVISION = "0f9a62c"


def _old_module() -> ModuleType:
    """The previous sampler implementation, ``privfed.dp.samplers`` at :data:`OLD_REVISION`."""
    try:
        source = subprocess.run(
            ["git", "-C", str(HERE), "show", f"{OLD_REVISION}:src/privfed/dp/samplers.py"],  # noqa: S607
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            f"benchmarks/samplers.py: the old samplers come from git commit {OLD_REVISION}; "
            f"run it in a clone with that history ({exc})"
        ) from None
    path = Path(tempfile.mkdtemp(prefix="privfed-old-samplers-")) / "_old_samplers.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_old_samplers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_old_samplers"] = module
    spec.loader.exec_module(module)
    return module


def _best(fn: Any, repeats: int) -> tuple[float, float]:
    """Minimum wall and CPU seconds of ``fn()`` over ``repeats`` calls."""
    wall, cpu = math.inf, math.inf
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def _clear(module: ModuleType) -> None:
    module._poisson_table.cache_clear()
    module._gaussian_table.cache_clear()


def speed_part(
    modules: dict[str, ModuleType], sigmas: list[float], dims: list[int], repeats: int
) -> list[dict[str, Any]]:
    rows = []
    for sigma in sigmas:
        for sampler, param in (
            ("discrete-gaussian", sigma),
            ("skellam", sigma * sigma / 2.0),
        ):
            for label, module in modules.items():
                fn = (
                    module.exact_discrete_gaussian
                    if sampler == "discrete-gaussian"
                    else module.skellam_noise
                )
                _clear(module)
                w0 = time.perf_counter()
                fn(16, param, seed=0)  # builds the table
                build = time.perf_counter() - w0
                for dim in dims:
                    fn(dim, param, seed=1)  # warm (and any lazily built index)
                    wall, cpu = _best(lambda f=fn, d=dim, p=param: f(d, p, seed=2), repeats)
                    rows.append(
                        {
                            "implementation": label,
                            "sampler": sampler,
                            "sigma": sigma,
                            "parameter": param,
                            "draws": dim,
                            "seconds": wall,
                            "cpu_seconds": cpu,
                            "samples_per_second": dim / wall,
                            "samples_per_cpu_second": dim / cpu,
                            "table_build_seconds": build,
                        }
                    )
                    print(
                        f"  {label:<3} {sampler:<17} σ={sigma:<6g} d={dim:<8d} "
                        f"{dim / wall / 1e6:7.2f} M/s wall {dim / cpu / 1e6:7.2f} M/s cpu"
                        f"  (table {build * 1e3:.2f} ms)",
                        flush=True,
                    )
    return rows


def _secagg_seconds(
    inputs: list[Any], threshold: int, seeds: list[list[bytes]], repeats: int
) -> tuple[float, float]:
    """(mean client seconds, round wall seconds) of one round, least-disturbed run."""
    from privfed.secagg import run_protocol

    layers = len(seeds[0])
    protocol, wall = math.inf, math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        report = run_protocol(
            inputs,
            threshold=threshold,
            ring_bits=32,
            noise_layers=layers,
            noise_seeds=seeds if layers else None,
        )
        protocol = min(protocol, report.mean_client_seconds)
        wall = min(wall, time.perf_counter() - start)
    return protocol, wall


def _client_noise(
    module: ModuleType, new: bool, mechanism: str, dim: int, means: list[float], seeds: list[bytes]
) -> Any:
    """One client's noise for a round: layer 0 plus one draw per layer seed."""
    from privfed.dp.distributed_blocks import layered_noise

    def noise() -> None:
        if mechanism == "discrete-gaussian":
            module.exact_discrete_gaussian(dim, math.sqrt(2.0 * means[0]), seed=b"own" * 8)
            return
        total = module.skellam_noise(dim, means[0], seed=b"layer0" * 4)
        for j, key in enumerate(seeds, start=1):
            if new:
                total += layered_noise([means[j]], [dim], key)
            else:  # the same per-layer streams' cost, from the old module
                total += module.skellam_noise(dim, means[j], seed=key)

    return noise


def round_part(
    modules: dict[str, ModuleType], dims: list[int], repeats: int, clients: int = 20
) -> list[dict[str, Any]]:
    threshold = clients // 2 + 1
    most = clients - threshold
    means = [2.0e4 / (j + 1) for j in range(most + 1)]  # λ per layer, 1e3-scale stds
    rows = []
    for dim in dims:
        rng = np.random.default_rng(0)
        inputs = [rng.integers(0, 2**32, size=dim, dtype=np.uint64) for _ in range(clients)]
        for layers, mechanism in ((most, "skellam"), (0, "skellam"), (0, "discrete-gaussian")):
            seeds = [[bytes([i, j + 1]) * 16 for j in range(layers)] for i in range(clients)]
            if mechanism == "skellam":  # the same round for both mechanisms without layers
                protocol, wall_protocol = _secagg_seconds(inputs, threshold, seeds, repeats)
            for label, module in modules.items():
                noise = _client_noise(module, label == "new", mechanism, dim, means, seeds[0])
                noise()  # tables warm, as for a client from its second round on
                wall, cpu = _best(noise, repeats)
                share = wall / (wall + protocol)
                rows.append(
                    {
                        "implementation": label,
                        "mechanism": mechanism,
                        "clients": clients,
                        "threshold": threshold,
                        "layers": layers,
                        "dimension": dim,
                        "client_noise_seconds": wall,
                        "client_noise_cpu_seconds": cpu,
                        "client_secagg_seconds": protocol,
                        "round_wall_seconds": wall_protocol,
                        "noise_share": share,
                    }
                )
                print(
                    f"  {label:<3} d={dim:<8d} {mechanism:<17} L={layers} noise "
                    f"{wall * 1e3:8.1f} ms ({cpu * 1e3:.1f} CPU), secure aggregation "
                    f"{protocol * 1e3:8.1f} ms per client -> noise share {100 * share:.1f} %",
                    flush=True,
                )
    return rows


def latent_part(
    modules: dict[str, ModuleType], dims: list[int], repeats: int
) -> list[dict[str, Any]]:
    """``distributed_dp.cost_part`` with each implementation behind the block samplers.

    The implementations alternate ``repeats`` times; each row keeps its least-disturbed
    repeat (cost_part times wall clock, which the shared machine's load inflates).
    """
    sys.path.insert(0, str(HERE))
    import distributed_dp
    from privfed.dp import distributed_blocks, samplers

    saved = {
        name: getattr(owner, name)
        for owner, names in (
            (distributed_blocks, ("exact_discrete_gaussian", "skellam_noise")),
            (samplers, ("_poisson_table", "_gaussian_table")),
        )
        for name in names
    }
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    try:
        for repeat in range(repeats):
            for label, module in modules.items():
                print(f"  {label} (repeat {repeat + 1}):", flush=True)
                for name in ("exact_discrete_gaussian", "skellam_noise"):
                    setattr(distributed_blocks, name, getattr(module, name))
                for name in ("_poisson_table", "_gaussian_table"):  # cost_part clears these
                    setattr(samplers, name, getattr(module, name))
                for r in distributed_dp.cost_part(20, 10.0, dims):
                    key = (label, r["latent_dim"], r["model"], r["layers"])
                    seconds = r["client_noise_seconds"]
                    if key not in best or seconds < best[key]["client_noise_seconds"]:
                        best[key] = {"implementation": label, **r}
    finally:
        for name, value in saved.items():
            owner = distributed_blocks if not name.startswith("_") else samplers
            setattr(owner, name, value)
    rows = list(best.values())
    for r in rows:
        print(
            f"  {r['implementation']:<3} d={r['latent_dim']:<3} {r['model']:<21} "
            f"layers={r['layers']:<2} noise {r['client_noise_seconds'] * 1e3:.1f} ms, protocol "
            f"{r['client_protocol_seconds'] * 1e3:.1f} ms -> noise share "
            f"{100 * r['noise_share_of_client_seconds']:.1f} % (least-disturbed repeat)",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[1.0, 10.0, 1000.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--round-dims", type=int, nargs="*", default=[100_000])
    parser.add_argument("--latent-dims", type=int, nargs="*", default=[8, 32])
    parser.add_argument("--no-old", action="store_true", help="skip the old implementation")
    parser.add_argument("--output", type=Path, default=RESULTS / "samplers.json")
    args = parser.parse_args()

    from privfed.dp import samplers

    modules = {"new": samplers} if args.no_old else {"old": _old_module(), "new": samplers}
    load_before = os.getloadavg()
    print("1. samples per second (tables built; min over repeats)", flush=True)
    speed = speed_part(modules, args.sigmas, args.dims, args.repeats)
    print("2. a training client's round: noise vs. secure aggregation", flush=True)
    rounds = round_part(modules, args.round_dims, args.repeats)
    print("3. a one-shot latent client (distributed_dp.py section 2, cold tables)", flush=True)
    latent = latent_part(modules, args.latent_dims, args.repeats) if args.latent_dims else []
    speedups = {
        f"{r['sampler']} sigma={r['sigma']:g} d={r['draws']}": o["seconds"] / r["seconds"]
        for r in speed
        if r["implementation"] == "new"
        for o in speed
        if o["implementation"] == "old"
        and (o["sampler"], o["sigma"], o["draws"]) == (r["sampler"], r["sigma"], r["draws"])
    }
    result = {
        "benchmark": "samplers",
        "command": " ".join(["python", "benchmarks/samplers.py", *sys.argv[1:]]),
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "speed": speed,
        "training_round": rounds,
        "latent_client": latent,
        "summary": {
            "speedup_old_seconds_over_new": speedups,
            "max_new_noise_share": max(
                (r["noise_share"] for r in rounds if r["implementation"] == "new"), default=None
            ),
            "latent_noise_share": {
                f"{r['implementation']} d={r['latent_dim']} {r['model']} L={r['layers']}": r[
                    "noise_share_of_client_seconds"
                ]
                for r in latent
            },
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
