"""Wall time of the main job, ``privfed run`` with its defaults, against an earlier commit.

A researcher runs the main job many times a day, so what counts is the whole
process: interpreter start, imports, the job's stages and writing the run
directory.  This script times exactly that, for today's tree and for a baseline
commit, as alternating fresh processes in the same run (so the machine's load
hits both alike), and splits each process's time into

* imports: the heaviest modules loaded (``python -X importtime``, one extra run
  each), and
* the job's stages, as the run records them in ``evaluation.json``;

and times, in the same rotation, a fresh interpreter that only imports torch:
the part of every run no change inside privfed can remove.

The baseline is extracted with ``git archive`` into a temporary directory (no
change to the checkout) and run with the same interpreter and packages through
``PYTHONPATH``; both trees are byte-compiled first, as ``make run`` does, so the
comparison is not about bytecode caches.

    python benchmarks/run_wall.py [--repeats 5] [--baseline-ref 1dd1539]
    python benchmarks/run_wall.py --mnist-like [--repeats 3]   # writes run_wall_mnist.json

``--mnist-like`` runs both trees on the 10,000-image 28x28 ``.npz`` that
``benchmarks/classifier_speed.py`` makes from the bundled digits (PCA d = 16, as
there; ``--npz PATH`` uses another file of that layout, e.g. a real MNIST test set).

Writes ``benchmarks/results/run_wall.json`` and ``run_wall.png``.  On a shared
machine absolute seconds move with the load; the medians and their ratio,
measured alternately, are the robust figures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# The last commit before the main job's imports were trimmed (stop 18's tree).
DEFAULT_BASELINE = "1dd1539"
HEAVY = (
    "torch",
    "torch._dynamo",
    "scipy.stats",
    "scipy.special",
    "scipy.optimize",
    "matplotlib",
    "matplotlib.pyplot",
    "sklearn",
    "privfed",
)


def _log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _extract(ref: str, into: Path) -> Path:
    """``src/`` of commit ``ref`` under ``into``, by ``git archive`` (the checkout is untouched)."""
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git is needed to extract the baseline commit")
    blob = subprocess.run(
        [git, "-C", str(ROOT), "archive", "--format=tar", ref, "src"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as archive:
        archive.extractall(into, filter="data")
    return into / "src"


def _compile(src: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL
    )


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    return env


def _privfed_run(
    src: Path, out: Path, extra: list[str], *, python_flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``python [flags] -m privfed run`` on tree ``src`` into ``out``; exits on failure."""
    command = [sys.executable, *python_flags, "-m", "privfed", "run", "--overwrite", "--quiet"]
    proc = subprocess.run(
        [*command, "--output-dir", str(out), *extra],
        env=_env(src),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"privfed run failed ({src}):\n{proc.stderr[-2000:]}")
    return proc


def _one_run(src: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    _privfed_run(src, out, extra)
    wall = time.perf_counter() - start
    evaluation = json.loads((out / "evaluation.json").read_text())
    stages = {k: float(v) for k, v in evaluation["seconds"].items()}
    return {
        "wall_seconds": wall,
        "stage_seconds": stages,
        "stages_total_seconds": sum(stages.values()),
        "accuracy_synthetic": evaluation.get("accuracy_synthetic"),
        "load_average_1min": os.getloadavg()[0],
    }


def _torch_start() -> float:
    """Seconds for a fresh interpreter to ``import torch`` (the job's fixed floor)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - start


def _import_profile(src: Path, out: Path, extra: list[str]) -> dict[str, float]:
    """Cumulative import seconds of the HEAVY modules in one ``privfed run`` (first load only)."""
    proc = _privfed_run(src, out, extra, python_flags=("-X", "importtime"))
    found: dict[str, float] = {}
    top_level = 0.0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        label = name.strip()
        if (len(name) - len(name.lstrip(" "))) // 2 == 0:  # depth 0 (one space after "|")
            top_level += int(cumulative) / 1e6
        if label in HEAVY and label not in found:
            found[label] = int(cumulative) / 1e6
    found["all top-level imports"] = top_level
    return found


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
    }


def _plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _log("matplotlib not installed: no PNG")
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    labels = ["baseline", "today"]
    for i, key in enumerate(("baseline", "today")):
        runs = result[key]["runs"]
        stages = statistics.median(r["stages_total_seconds"] for r in runs)
        wall = result[key]["wall_seconds"]["median"]
        ax.barh(i, stages, color="#4c72b0", label="job stages" if i == 0 else None)
        ax.barh(
            i,
            wall - stages,
            left=stages,
            color="#dd8452",
            label="start, imports, writing" if i == 0 else None,
        )
        ax.text(wall + 0.1, i, f"{wall:.1f} s", va="center")
    goal = result["meta"]["goal_seconds"]
    ax.axvline(goal, color="k", ls="--", lw=1, label=f"goal {goal:g} s")
    ax.set_yticks([0, 1], [f"{labels[0]} ({result['meta']['baseline_ref']})", labels[1]])
    ax.set_xlabel(f"median wall seconds of `privfed run` ({result['meta']['dataset']})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-ref", default=DEFAULT_BASELINE)
    parser.add_argument("--mnist-like", action="store_true", help="the 28x28 .npz, d = 16")
    parser.add_argument("--npz", type=Path, default=None, help="with --mnist-like: use this file")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.npz is not None and not args.mnist_like:
        parser.error("--npz needs --mnist-like")
    if args.output is None:
        args.output = RESULTS / ("run_wall_mnist.json" if args.mnist_like else "run_wall.json")

    with tempfile.TemporaryDirectory(prefix="privfed-run-wall-") as tmp:
        work = Path(tmp)
        extra: list[str] = []
        dataset = "digits (bundled)"
        if args.mnist_like:
            npz = args.npz
            if npz is None:
                sys.path.insert(0, str(ROOT / "benchmarks"))
                from classifier_speed import make_mnist_like

                npz = make_mnist_like(work / "mnist_like.npz")
                dataset = "10,000 28x28 images made from the bundled digits (classifier_speed.py)"
            else:
                dataset = str(npz)
            extra = ["--dataset", str(npz), "--latent-dim", "16"]
        trees = {"baseline": _extract(args.baseline_ref, work / "baseline"), "today": ROOT / "src"}
        for tree in trees.values():
            _compile(tree)
        runs: dict[str, list[dict[str, Any]]] = {key: [] for key in trees}
        torch_start: list[float] = []
        # One warm-up each (file-system caches), not recorded.
        for key, tree in trees.items():
            _log(f"warm-up: {key}")
            _one_run(tree, work / f"warm-{key}", extra)
        for repeat in range(args.repeats):
            torch_start.append(_torch_start())
            for key, tree in trees.items():
                run = _one_run(tree, work / f"{key}-{repeat}", extra)
                runs[key].append(run)
                _log(
                    f"repeat {repeat + 1}/{args.repeats} {key}: {run['wall_seconds']:.2f} s wall, "
                    f"{run['stages_total_seconds']:.2f} s in stages "
                    f"(load {run['load_average_1min']:.1f})"
                )
        imports = {
            key: _import_profile(tree, work / f"imports-{key}", extra)
            for key, tree in trees.items()
        }

    result: dict[str, Any] = {
        "meta": {
            "command": "python benchmarks/run_wall.py " + " ".join(sys.argv[1:]),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "baseline_ref": args.baseline_ref,
            "repeats": args.repeats,
            "note": "fresh processes, baseline and today alternately; both trees byte-compiled",
            "dataset": dataset,
            # The goals: 10 s on the bundled digits, 60 s on a 10,000-image MNIST.
            "goal_seconds": 60.0 if args.mnist_like else 10.0,
            "extra_arguments": extra,
        }
    }
    for key in trees:
        walls = [r["wall_seconds"] for r in runs[key]]
        result[key] = {
            "wall_seconds": _summary(walls),
            "stages_total_seconds": _summary([r["stages_total_seconds"] for r in runs[key]]),
            "import_seconds": imports[key],
            "runs": runs[key],
        }
    result["python_import_torch_seconds"] = _summary(torch_start)
    result["today_over_baseline"] = (
        result["today"]["wall_seconds"]["median"] / result["baseline"]["wall_seconds"]["median"]
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    _plot(result, args.output.with_suffix(".png"))

    print(f"\n{'':<10} {'wall s (median)':>16} {'[min, max]':>16} {'stages s':>9}")
    for key in trees:
        w, s = result[key]["wall_seconds"], result[key]["stages_total_seconds"]
        span = f"[{w['min']:.1f}, {w['max']:.1f}]"
        print(f"{key:<10} {w['median']:>16.2f} {span:>16} {s['median']:>9.2f}")
    print(f"today / baseline: {result['today_over_baseline']:.2f}x")
    anchor = result["python_import_torch_seconds"]["median"]
    print(f"anchor: a fresh `python -c 'import torch'` takes {anchor:.2f} s (median)")
    print("heaviest imports (s, cumulative, one -X importtime run each):")
    for name in [*HEAVY, "all top-level imports"]:
        b, t = imports["baseline"].get(name), imports["today"].get(name)
        if b is None and t is None:
            continue
        print(f"  {name:<24} baseline {_fmt(b):>6}   today {_fmt(t):>6}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
