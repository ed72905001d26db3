"""The latent job's downstream classifier: time and accuracy, before and after, in one run.

"Before" reproduces the settings the project used until early stopping: the
convolutional classifier (``classifier="cnn"``), a fixed 20 epochs on all
training records (``classifier_patience=None``), one torch thread, and the two
baselines trained in every run.  "After" is today's :class:`PipelineConfig`
defaults: the MLP classifier, at most 50 epochs with early stopping on the loss
of a held-out tenth of the (synthetic) training data, torch's own thread count,
baselines only when asked (``--baselines``).

Two datasets:

* ``digits`` -- the bundled 8x8 digits, ``privfed run`` defaults (PCA d = 8);
* ``mnist-like`` -- a 10,000-image ``.npz`` of 28x28 ``uint8`` images that this
  script CREATES from the bundled digits (each 8x8 digit drawn into a 20x20 box
  of a 28x28 frame, as in MNIST, with bicubic resampling, a random rotation of
  up to 12 degrees, a scale of 0.9-1.1 and a shift of up to 1.7 pixels; the
  1797 originals are each used about 5.6 times, so its test split holds
  near-copies of training digits: it measures cost at MNIST's size and shape,
  not MNIST's difficulty), run with PCA d = 16.  ``--npz PATH`` keeps the file;
  a real MNIST ``.npz`` can be passed instead with ``--mnist-npz``.

Two measurements, both with before and after side by side:

1. accuracy of the synthetic-data classifier on the real test split (the number
   the release is judged by), median and range over ``--seeds`` whole in-process
   runs (audit off; seed = design seed = noise seed), with the train stage's
   seconds;
2. wall time of whole processes that run the job end to end and write the run
   directory like ``privfed run`` does (imports included; audit on, DP noise from
   the OS CSPRNG), before and after alternately, ``--wall-repeats`` times
   (``--mnist-wall-repeats`` on the larger set), plus ``python -m privfed run``
   itself with its defaults.

On a shared machine the absolute seconds move with the load; before and after
are measured alternately in the same run so their ratio is the robust figure.

    python benchmarks/classifier_speed.py [--seeds 0 1 2 3 4] [--wall-repeats 3]
                                          [--mnist-wall-repeats 1] [--skip-mnist]
                                          [--npz PATH] [--mnist-npz PATH]

Writes benchmarks/results/classifier_speed.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

#: The settings of the classifier before early stopping (and the then-default baselines).
BEFORE: dict[str, Any] = {
    "classifier": "cnn",
    "classifier_epochs": 20,
    "classifier_patience": None,
    "num_threads": 1,
    "baselines": True,
}


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_mnist_like(path: Path, count: int = 10_000, seed: int = 0) -> Path:
    """Write ``count`` 28x28 ``uint8`` digits made from the bundled 8x8 ones to ``path``."""
    import numpy as np
    import torch
    from torch.nn import functional

    from privfed.data import load_digits

    digits = load_digits()
    source = torch.from_numpy(np.array(digits.images))
    rng = np.random.default_rng(seed)
    pick = rng.permutation(np.resize(np.arange(source.shape[0]), count))
    angle = torch.from_numpy(rng.uniform(-12.0, 12.0, count) * math.pi / 180.0).float()
    scale = torch.from_numpy(rng.uniform(0.9, 1.1, count)).float()
    shift = torch.from_numpy(rng.uniform(-0.12, 0.12, (count, 2))).float()
    zoom = (28.0 / 20.0) / scale  # the 8x8 source fills a 20x20 box of the 28x28 frame
    theta = torch.zeros(count, 2, 3)
    theta[:, 0, 0] = zoom * torch.cos(angle)
    theta[:, 0, 1] = -zoom * torch.sin(angle)
    theta[:, 1, 0] = zoom * torch.sin(angle)
    theta[:, 1, 1] = zoom * torch.cos(angle)
    theta[:, :, 2] = shift
    grid = functional.affine_grid(theta, [count, 1, 28, 28], align_corners=False)
    images = functional.grid_sample(
        source[torch.from_numpy(pick)], grid, mode="bicubic", align_corners=False
    ).clamp(0.0, 1.0)
    pixels = np.rint(images[:, 0].numpy() * 255.0).astype(np.uint8)
    np.savez(path, images=pixels, labels=np.asarray(digits.labels)[pick])
    return path


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": values,
    }


def _accuracy(dataset: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """Synthetic-classifier accuracy and train-stage seconds, before and after, per seed."""
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    out: dict[str, dict[str, list[float]]] = {
        side: {"accuracy": [], "train_seconds": []} for side in ("before", "after")
    }
    for seed in seeds:
        for side in ("before", "after"):
            settings = {**(BEFORE if side == "before" else {}), "baselines": False}
            config = PipelineConfig(
                **dataset["config"], **settings, seed=seed, noise_seed=seed, audit=False
            )
            report = run_pipeline(config).report
            out[side]["accuracy"].append(report.accuracy_synthetic)
            out[side]["train_seconds"].append(report.seconds["train"])
            _log(
                f"  {dataset['name']} seed {seed} {side:<6}: accuracy "
                f"{report.accuracy_synthetic:.4f}, train {report.seconds['train']:.2f} s"
            )
    return {side: {k: _summary(v) for k, v in vals.items()} for side, vals in out.items()}


def _child_wall(config: dict[str, Any], workdir: Path) -> float:
    """Seconds of a fresh process that imports privfed, runs the job and writes its artefacts."""
    out = workdir / "run"
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config), "--child-dir", str(out)],
        check=True,
    )
    return time.perf_counter() - start


def _cli_wall(dataset: dict[str, Any], workdir: Path) -> float:
    """Seconds of ``python -m privfed run`` with its defaults (plus the dataset's options)."""
    argv = [sys.executable, "-m", "privfed", "run", "--quiet", "--overwrite"]
    argv += ["--output-dir", str(workdir / "cli"), *dataset["cli"]]
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _walls(dataset: dict[str, Any], repeats: int, workdir: Path) -> dict[str, Any]:
    times: dict[str, list[float]] = {"before": [], "after": [], "cli_after": []}
    for r in range(repeats):
        times["before"].append(_child_wall({**dataset["config"], **BEFORE}, workdir))
        times["after"].append(_child_wall(dict(dataset["config"]), workdir))
        times["cli_after"].append(_cli_wall(dataset, workdir))
        _log(
            f"  {dataset['name']} wall repeat {r + 1}/{repeats}: before "
            f"{times['before'][-1]:.1f} s, after {times['after'][-1]:.1f} s, "
            f"privfed run {times['cli_after'][-1]:.1f} s"
        )
    return {k: _summary(v) for k, v in times.items()}


def _child(config_json: str, out_dir: str) -> None:
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    result = run_pipeline(PipelineConfig(**json.loads(config_json)))
    result.write(out_dir, overwrite=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--wall-repeats", type=int, default=3, help="digits")
    parser.add_argument("--mnist-wall-repeats", type=int, default=1)
    parser.add_argument("--skip-mnist", action="store_true")
    parser.add_argument("--npz", type=Path, default=None, help="where to keep the MNIST-like file")
    parser.add_argument("--mnist-npz", type=Path, default=None, help="use this .npz instead")
    parser.add_argument("--output", type=Path, default=RESULTS / "classifier_speed.json")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, args.child_dir)
        return
    if min(args.wall_repeats, args.mnist_wall_repeats) < 1:
        parser.error("wall repeats must be >= 1")

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        datasets: list[dict[str, Any]] = [
            {
                "name": "digits",
                "config": {},
                "cli": [],
                "note": "bundled 8x8 digits, d = 8",
                "repeats": args.wall_repeats,
            }
        ]
        if not args.skip_mnist:
            if args.mnist_npz is not None:
                npz, note = args.mnist_npz, f"{args.mnist_npz}, d = 16"
            else:
                npz = args.npz or workdir / "mnist_like.npz"
                make_mnist_like(npz)
                note = (
                    "10,000 28x28 images made from the bundled digits (see the docstring), d = 16"
                )
            datasets.append(
                {
                    "name": "mnist-like",
                    "config": {"dataset": str(npz), "latent_dim": 16},
                    "cli": ["--dataset", str(npz), "--latent-dim", "16"],
                    "note": note,
                    "repeats": args.mnist_wall_repeats,
                }
            )
        results: dict[str, Any] = {}
        for dataset in datasets:
            _log(f"{dataset['name']}: accuracy over seeds {args.seeds} (before, after)")
            accuracy = _accuracy(dataset, args.seeds)
            _log(f"{dataset['name']}: whole-process wall time")
            walls = _walls(dataset, dataset["repeats"], workdir)
            results[dataset["name"]] = {
                "note": dataset["note"],
                "accuracy": accuracy,
                "wall_seconds": walls,
            }

    out = {
        "meta": {
            "command": "python benchmarks/classifier_speed.py " + " ".join(sys.argv[1:]),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu_count": os.cpu_count(),
            "torch_threads_default": torch.get_num_threads(),
            "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "seeds": args.seeds,
            "before": BEFORE,
            "after": "PipelineConfig defaults",
        },
        "datasets": results,
    }
    print(f"\n{'dataset':<11} {'figure':<34} {'before':>16} {'after':>16} {'after/before':>12}")
    for name, res in results.items():
        acc = res["accuracy"]
        rows = [
            ("accuracy (synthetic, median)", acc["before"]["accuracy"], acc["after"]["accuracy"]),
            (
                "train stage s (median)",
                acc["before"]["train_seconds"],
                acc["after"]["train_seconds"],
            ),
            (
                "whole job, process wall s",
                res["wall_seconds"]["before"],
                res["wall_seconds"]["after"],
            ),
        ]
        for label, before, after in rows:
            ratio = after["median"] / before["median"]
            print(
                f"{name:<11} {label:<34} {before['median']:>16.4f} {after['median']:>16.4f} "
                f"{ratio:>12.3f}"
            )
        cli = res["wall_seconds"]["cli_after"]
        print(f"{name:<11} {'privfed run (defaults) wall s':<34} {'':>16} {cli['median']:>16.4f}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
