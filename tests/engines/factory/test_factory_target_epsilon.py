"""DP-SGD factories to a target (ε, δ): per-cell calibration, the ledger, the CLI.

The privacy checks are deterministic (dp-accounting's PLDs are exact
computations, the runs are seeded), so none has a false-failure rate.  The
reference is dp-accounting's own ``PLDAccountant`` under replace-one adjacency,
composing ``steps`` Poisson-subsampled Gaussian steps, built from the numbers
the ledger records and nothing of privfed's accounting.

The dataset is a tiny ``.npz`` of digits with two classes of different sizes
held by two single-class clients: two cells, two different sampling rates,
two calibrations (each costs a few seconds), so the per-cell path is exercised
without the cost of ten.
"""

from __future__ import annotations

import json
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant

from privfed.engines.factory import EDMConfig, EDMTrainingConfig, UNetConfig
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import (
    calibrated_dpsgd,
    cell_noise_seed,
    make_factory,
    run_factory_pipeline,
)
from privfed.errors import ParameterError

TARGET = 0.5
DELTA = 1e-5
STEPS = 3
BATCH = 8


def _dp_accounting_epsilon(noise_multiplier: float, rate: float, steps: int) -> float:
    """ε at DELTA from dp-accounting alone (replace-one, its default PLD interval)."""
    step = dp_accounting.PoissonSampledDpEvent(
        sampling_probability=rate,
        event=dp_accounting.GaussianDpEvent(noise_multiplier=noise_multiplier),
    )
    accountant = PLDAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_accounting.SelfComposedDpEvent(event=step, count=steps))
    return float(accountant.get_epsilon(DELTA))


@pytest.fixture(scope="module")
def two_class_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Digits 0 (70 images) and 1 (100 images): the two cells differ in size."""
    from privfed.data import load_digits

    digits = load_digits()
    images, labels = np.asarray(digits.images), np.asarray(digits.labels)
    keep = np.concatenate([np.flatnonzero(labels == 0)[:70], np.flatnonzero(labels == 1)[:100]])
    path = tmp_path_factory.mktemp("data") / "two.npz"
    np.savez(path, images=images[keep], labels=labels[keep])
    return path


def _config(dataset: Path, **changes: object) -> FactoryPipelineConfig:
    options: dict[str, object] = {
        "dataset": str(dataset),
        "num_clients": 2,
        "factory": "edm",
        "epsilon": TARGET,
        "delta": DELTA,
        "unet": UNetConfig(block_out_channels=(8, 16), norm_num_groups=4),
        "edm": EDMConfig(sampling_steps=2),
        "edm_training": EDMTrainingConfig(steps=STEPS, batch_size=BATCH),
        "synthetic_per_class": 4,
        "classifier_epochs": 1,
        "fedavg_rounds": 1,
        "centralized": False,
        "audit": False,
        "public_fraction": 0.1,
        "test_fraction": 0.2,
    }
    options.update(changes)
    return FactoryPipelineConfig(**options)  # type: ignore[arg-type]


@pytest.mark.slow
def test_every_cell_is_calibrated_to_the_target_on_its_own_rate(two_class_npz: Path) -> None:
    stages: set[str] = set()
    report = run_factory_pipeline(
        _config(two_class_npz), progress=lambda event: stages.add(event.stage)
    )
    assert "calibration" in stages
    ledger = report.ledger
    assert ledger is not None and len(ledger.releases) == report.num_factories == 2
    counts = np.array(report.class_counts)
    rates = set()
    by_cell = {release.partition.label: release for release in ledger.releases}
    assert {r.partition.scheme for r in ledger.releases} == {"cell"}
    assert set(by_cell) == {f"class={c}/client={k}" for c, k in report.matrix.cells}
    for c, k in report.matrix.cells:
        release = by_cell[f"class={c}/client={k}"]
        n = int(counts[c, int(k)])
        assert release.steps == STEPS
        # The cell's own rate: the configured batch over the cell's size.
        assert release.sampling_rate == pytest.approx(BATCH / n, rel=1e-12)
        assert release.sampling_rate >= BATCH / n
        rates.add(release.sampling_rate)
        eps = _dp_accounting_epsilon(release.noise_multiplier, release.sampling_rate, STEPS)
        # Independently of privfed's ledger: within the target.  Both use PLDs at
        # interval 1e-4 (pessimistic); 1e-6 covers float noise of the two codes.
        assert eps <= TARGET + 1e-6
        # ...and not grossly over-noised: 3 % less noise misses the target.
        looser = _dp_accounting_epsilon(0.97 * release.noise_multiplier, release.sampling_rate, 3)
        assert looser > TARGET
        # The factory shipped the multiplier the ledger recorded.
        privacy = report.matrix.factory(c, k).privacy  # type: ignore[union-attr]
        assert privacy.noise_multiplier == release.noise_multiplier
        assert privacy.sampling_rate == release.sampling_rate
    assert len(rates) == 2  # two cell sizes, two rates, two multipliers
    # Cells are disjoint: parallel composition, the run's ε is the worst cell's.
    assert report.dp_epsilon is not None and report.dp_epsilon <= TARGET
    dp_section = report.release_dict()["dp"]
    assert dp_section["target_epsilon"] == TARGET
    assert dp_section["epsilon"] == report.dp_epsilon
    assert "sampling_rate_disclosure" in dp_section


@pytest.mark.slow
def test_a_fixed_rate_shares_one_calibration_and_keeps_counts_out(two_class_npz: Path) -> None:
    cfg = _config(two_class_npz, dp_sampling_rate=0.25)
    small, large = calibrated_dpsgd(cfg, 10), calibrated_dpsgd(cfg, 1000)
    assert small == large and small.sampling_rate == 0.25
    assert _dp_accounting_epsilon(small.noise_multiplier, 0.25, STEPS) <= TARGET + 1e-6
    factory = make_factory(cfg, 0, 0, sample_count=10)
    assert factory.training.dp == small
    with pytest.raises(ParameterError, match="sample_count"):
        make_factory(cfg, 0, 0)


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"factory": "gaussian", "dp_sampling_rate": 0.5}, "dp_sampling_rate"),
        ({"factory": "gaussian", "gaussian_basis": "private-pca"}, "gaussian_basis"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"dp_clip_norm": -1.0}, "dp_clip_norm"),
        ({"dp_sampling_rate": 1.5}, "dp_sampling_rate"),
        ({"epsilon": None, "dp_sampling_rate": 0.5}, "dp_sampling_rate"),
        ({"epsilon": None, "factory": "gaussian", "noise_seed": 1}, "noise_seed"),
        ({"factory": "edm", "noise_seed": 1}, "noise_seed"),
        ({"factory": "gaussian", "noise_seed": -1}, "noise_seed"),
    ],
)
def test_bad_targets_are_refused_with_the_parameter_named(
    two_class_npz: Path, changes: dict[str, object], name: str
) -> None:
    with pytest.raises(ParameterError) as info:
        _config(two_class_npz, **changes)
    assert info.value.parameter == name  # type: ignore[attr-defined]


def test_a_given_dp_config_and_a_target_are_refused_together(two_class_npz: Path) -> None:
    from privfed.engines.factory import DPSGDConfig

    training = EDMTrainingConfig(steps=2, dp=DPSGDConfig(noise_multiplier=1.0))
    with pytest.raises(ParameterError, match="calibrated"):
        _config(two_class_npz, edm_training=training)
    with pytest.raises(ParameterError, match="epsilon"):
        calibrated_dpsgd(_config(two_class_npz, epsilon=None), 10)


@pytest.mark.slow
def test_cli_trains_dp_factories_to_a_target(
    two_class_npz: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from privfed.cli import main

    out = tmp_path / "run"
    argv = ["run", "--engine", "factory", "--factory", "edm", "--dataset", str(two_class_npz)]
    argv += ["--clients", "2", "--epsilon", str(TARGET), "--delta", str(DELTA)]
    argv += ["--samples-per-class", "4", "--epochs", "1", "--fedavg-rounds", "1"]
    argv += ["--no-baselines", "--no-audit", "--quiet", "--output-dir", str(out)]
    # The CLI's EDM defaults (300 steps) are too slow for a test: the run keeps
    # everything the CLI parsed and only shrinks the UNet and the steps.
    with pytest.MonkeyPatch.context() as patch:
        _shrink_cli_edm(patch)
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "target (per cell, calibrated)" in printed
    release = json.loads((out / "release.json").read_text())
    assert release["dp"]["target_epsilon"] == TARGET
    assert release["dp"]["epsilon"] <= TARGET
    ledger = json.loads((out / "ledger.json").read_text())
    releases = ledger["releases"]
    assert len(releases) == 2
    for item in releases:
        eps = _dp_accounting_epsilon(item["noise_multiplier"], item["sampling_rate"], item["steps"])
        assert eps <= TARGET + 1e-6


def _shrink_cli_edm(patch: pytest.MonkeyPatch) -> None:
    """Run the CLI's configuration with a tiny UNet and 3 DP-SGD steps."""
    import dataclasses

    from privfed.engines.factory import job

    original = job.run_factory_pipeline

    def tiny(config: FactoryPipelineConfig, **kwargs: object) -> object:
        assert config.epsilon == TARGET and config.delta == DELTA  # what the CLI parsed
        small = dataclasses.replace(
            config,
            unet=UNetConfig(block_out_channels=(8, 16), norm_num_groups=4),
            edm=EDMConfig(sampling_steps=2),
            edm_training=EDMTrainingConfig(steps=STEPS, batch_size=BATCH),
        )
        return original(small, **kwargs)  # type: ignore[arg-type]

    patch.setattr(job, "run_factory_pipeline", tiny)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--factory", "edm", "--delta", "1e-6"], "--delta applies"),
        (["--factory", "edm", "--epsilon", "-1"], "--epsilon"),
        (["--epsilon", "1", "--delta", "1.5"], "--delta"),
    ],
)
def test_cli_refuses_bad_combinations_in_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from privfed.cli import main

    try:
        code = main(["run", "--engine", "factory", *argv, "--output-dir", str(tmp_path / "o")])
    except SystemExit as exc:  # a value out of range is refused by argparse itself
        code = exc.code
    assert code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "o").exists()


# -- Gaussian factories: one Gaussian release of clipped latent moments per cell --------


def _gaussian_epsilon(noise_multiplier: float) -> float:
    """ε at DELTA of a whitened Gaussian release (Δ = 1, σ), from dp-accounting alone."""
    accountant = PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier=noise_multiplier))
    return float(accountant.get_epsilon(DELTA))


@pytest.mark.slow
def test_dp_gaussian_factories_meet_the_target_in_every_cell() -> None:
    from privfed.dp import Adjacency, GaussianRelease
    from privfed.engines.factory.job import public_codec
    from privfed.engines.moments.planning import plan_latent_release

    target = 2.0
    cfg = FactoryPipelineConfig(
        epsilon=target,
        delta=DELTA,
        synthetic_per_class=20,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit=False,
    )
    report = run_factory_pipeline(cfg)
    ledger = report.ledger
    assert ledger is not None and len(ledger.releases) == report.num_factories == 10
    codec = public_codec(cfg)
    assert codec is not None
    radius, d = float(codec.default_clip_norm), int(codec.latent_dim)
    plan = plan_latent_release(
        target, DELTA, clip_norm=radius, dim=d, adjacency=Adjacency.REPLACE_ONE
    )
    by_cell = {release.partition.label: release for release in ledger.releases}
    assert set(by_cell) == {f"class={c}/client={k}" for c, k in report.matrix.cells}
    for c, k in report.matrix.cells:
        release = by_cell[f"class={c}/client={k}"]
        assert isinstance(release, GaussianRelease)
        assert release.partition.scheme == "cell"
        assert release.adjacency is Adjacency.REPLACE_ONE and not release.seeded
        # dp-accounting, independently of privfed's ledger: within the target.
        assert _gaussian_epsilon(release.noise_std) <= target + 1e-6
        # The whitened μ = 1/σ never exceeds the plan's exact joint μ.
        assert 1.0 / release.noise_std <= plan.mu
        privacy = report.matrix.factory(c, k).privacy  # type: ignore[union-attr]
        assert privacy.mechanism == "gaussian" and privacy.clip_norm == radius
    # An independent check of the plan's sensitivity: no replacement of one clipped latent
    # (random directions, antipodal and orthogonal pairs at the radius) moves the whitened
    # (sum, second moment) pair by more than μ.  Deterministic (fixed seed).
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2000):
        z, w = rng.normal(size=(2, d))
        z *= radius / np.linalg.norm(z)
        w *= radius * rng.uniform(0, 1) ** (1 / d) / np.linalg.norm(w)
        for other in (w, -z, w - (w @ z) / (z @ z) * z):
            ds = np.sum((z - other) ** 2) / plan.noise_std_sum**2
            dm = np.sum((np.outer(z, z) - np.outer(other, other)) ** 2)
            worst = max(worst, ds + dm / plan.noise_std_second_moment**2)
    assert worst <= plan.mu**2 * (1 + 1e-12)
    assert report.release_dict()["dp"]["epsilon"] <= target


def test_a_dp_gaussian_factory_ships_its_record_and_refuses_a_private_basis(
    tmp_path: Path,
) -> None:
    import torch

    from privfed.data import load_digits
    from privfed.engines.codecs import PCACodec
    from privfed.engines.factory import LatentGaussianFactory, load_factory
    from privfed.engines.factory.gaussian import LatentGaussianDP

    images = torch.tensor(np.asarray(load_digits().images[:200]), dtype=torch.float32)
    codec = PCACodec.fit(images[:100], latent_dim=6)
    dp = LatentGaussianDP(epsilon=1.0, delta=DELTA, seed=3)
    assert "seed=" not in repr(dp) and "seeded=True" in repr(dp)
    factory = LatentGaussianFactory(codec=codec, dp=dp, class_id=0, client_id=0)
    factory.fit(images[100:])
    again = LatentGaussianFactory(codec=codec, dp=dp).fit(images[100:])
    # Seeded noise is reproducible, and the noisy fit differs from the exact one.
    assert torch.equal(factory.state_tensors()["latent_mean"], again.state_tensors()["latent_mean"])
    exact = LatentGaussianFactory(codec=codec).fit(images[100:])
    assert not torch.equal(
        factory.state_tensors()["latent_mean"], exact.state_tensors()["latent_mean"]
    )
    assert factory.privacy.mechanism == "gaussian" and factory.privacy.seeded
    loaded = load_factory(factory.save(tmp_path / "f"), codec=codec)
    assert loaded.privacy == factory.privacy
    with pytest.raises(ParameterError) as info:
        LatentGaussianFactory(dp=dp)
    assert info.value.parameter == "dp"  # type: ignore[attr-defined]
    with pytest.raises(ParameterError) as info:
        FactoryPipelineConfig(epsilon=1.0, gaussian_basis="private-pca")
    assert info.value.parameter == "gaussian_basis"  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_noise_seed_makes_gaussian_factories_reproducible_per_cell(tmp_path: Path) -> None:
    from privfed.cli import main

    argv = ["run", "--engine", "factory", "--epsilon", "2", "--noise-seed", "5", "--quiet"]
    argv += ["--samples-per-class", "10", "--epochs", "1", "--fedavg-rounds", "1"]
    argv += ["--no-baselines", "--no-audit"]
    for name in ("a", "b"):
        assert main([*argv, "--output-dir", str(tmp_path / name)]) == 0
    assert (tmp_path / "a" / "synthetic.npz").read_bytes() == (
        tmp_path / "b" / "synthetic.npz"
    ).read_bytes()
    for artefact in ("release.json", "ledger.json"):
        # Equal but for the provenance (each run has its own id and time).
        a, b = (json.loads((tmp_path / n / artefact).read_text()) for n in ("a", "b"))
        assert a.pop("provenance")["run_id"] != b.pop("provenance")["run_id"]
        assert a == b
    release = json.loads((tmp_path / "a" / "release.json").read_text())
    assert release["public"]["config"]["noise_seeded"] is True
    assert "noise_seed" not in release["public"]["config"]
    items = json.loads((tmp_path / "a" / "ledger.json").read_text())["releases"]
    assert len(items) == 10 and all(item["seeded"] for item in items)
    # Every cell draws its own stream (equal noise in two cells would cancel).
    cfg = FactoryPipelineConfig(epsilon=2.0, noise_seed=5)
    seeds = {cell_noise_seed(cfg, c, k) for c in range(10) for k in range(10)}
    assert len(seeds) == 100 and None not in seeds
    assert cell_noise_seed(FactoryPipelineConfig(epsilon=2.0), 0, 0) is None


@pytest.mark.slow
def test_cli_gaussian_factories_to_a_target(tmp_path: Path) -> None:
    from privfed.cli import main

    out = tmp_path / "run"
    argv = ["run", "--engine", "factory", "--epsilon", "2", "--delta", str(DELTA)]
    argv += ["--samples-per-class", "10", "--epochs", "1", "--fedavg-rounds", "1"]
    argv += ["--no-baselines", "--no-audit", "--quiet", "--output-dir", str(out)]
    assert main(argv) == 0
    release = json.loads((out / "release.json").read_text())
    assert release["dp"]["target_epsilon"] == 2.0 and release["dp"]["epsilon"] <= 2.0
    assert "Gaussian mechanism" in release["dp"]["mechanism"]
    items = json.loads((out / "ledger.json").read_text())["releases"]
    assert len(items) == 10
    for item in items:
        assert _gaussian_epsilon(item["noise_std"] / item["l2_sensitivity"]) <= 2.0 + 1e-6
