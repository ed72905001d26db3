"""The ``device="cuda"`` code paths, on tiny data.

Every test here is marked ``cuda``: deselected unless ``--run-cuda`` is given,
and then FAILED (not skipped) where torch sees no GPU (see ``tests/conftest.py``).
The device is ``PRIVFED_TEST_DEVICE`` (default ``"cuda"``); setting it to
``"cpu"`` runs the same bodies on the CPU, which checks the tests' own logic on
a machine without a GPU.

What is checked against the CPU:

* the latent statistics are exact fixed-point integer sums, so the device must
  give BIT-IDENTICAL results (including both clipping steps, the float64 Gram
  flushes and the many-classes path);
* floating-point models (classifier, EDM factory, DP-SGD) must train on the
  device, keep their parameters there, and agree with the CPU to within
  float32 rounding where the randomness is the same (TF32 is switched off for
  those comparisons), or reach a sane accuracy;
* the pipelines and ``privfed run`` accept a device and produce sane reports.

The whole file runs in well under two minutes on one GPU.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from privfed.audit.torch_scoring import per_example_losses, true_class_probabilities
from privfed.cli import main
from privfed.data import load_digits
from privfed.engines.classifier import evaluate_classifier, train_classifier
from privfed.engines.codecs import ConvAutoencoderCodec, DiffusersCodec, PCACodec
from privfed.engines.factory import (
    DPSGDConfig,
    EDMConfig,
    EDMDiffusionFactory,
    EDMTrainingConfig,
    FactoryAuditConfig,
    GaussianNoiseSource,
    UNetConfig,
)
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.dpsgd import dp_sgd_step
from privfed.engines.factory.fedavg import run_fedavg
from privfed.engines.factory.job import run_factory_pipeline
from privfed.engines.latent.client import LatentStatisticsAccumulator, compute_latent_statistics
from privfed.engines.latent.job import PipelineConfig, run_pipeline
from privfed.engines.latent.statistics import LatentStatistics, LatentStatisticsConfig
from privfed.errors import NonFiniteInputError

pytestmark = pytest.mark.cuda

DEVICE = os.environ.get("PRIVFED_TEST_DEVICE", "cuda")
DEVICE_TYPE = torch.device(DEVICE).type

TINY_UNET = UNetConfig(block_out_channels=(8, 16), norm_num_groups=4)


@pytest.fixture(autouse=True)
def _one_cpu_thread() -> Iterator[None]:
    """The CPU references are tiny; one intra-op thread is fastest (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def digits() -> tuple[torch.Tensor, torch.Tensor]:
    ds = load_digits()
    return torch.from_numpy(np.array(ds.images)), torch.from_numpy(np.array(ds.labels))


def _assert_on_device(tensors: Iterator[torch.Tensor] | list[torch.Tensor]) -> None:
    devices = {t.device.type for t in tensors}
    assert devices == {DEVICE_TYPE}, f"expected everything on {DEVICE_TYPE}, found {devices}"


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    """IEEE float32 for matmuls and convolutions (TF32 would hide real mismatches)."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn


def _rng_states() -> list[torch.Tensor]:
    """The CPU generator's state and, on a CUDA device, that device's generator state."""
    states = [torch.get_rng_state()]
    if DEVICE_TYPE == "cuda":
        states.append(torch.cuda.get_rng_state(torch.device(DEVICE)))
    return states


def _assert_same_trajectory(
    device_run: EDMDiffusionFactory,
    cpu_run: EDMDiffusionFactory,
    image_shape: tuple[int, ...],
    *,
    seed: int,
) -> None:
    """The device's weights moved from the (shared) initial weights like the CPU's.

    Float32 reordering makes the two runs differ slightly (an Adam step of a
    gradient that is zero up to rounding can even change sign), so the check is
    relative to how far training moved the weights: a device that trained on
    other data, σ or noise would be off by about 100 %, not by 1 %.
    """
    dev_w, cpu_w = device_run.state_tensors(), cpu_run.state_tensors()
    init = cpu_run._build(*image_shape, seed).state_dict()
    assert dev_w.keys() == cpu_w.keys() == init.keys()
    for name, value in dev_w.items():
        assert value.device.type == "cpu" and bool(torch.isfinite(value).all()), name
    flat = {
        k: torch.cat([w[n].double().flatten() for n in init])
        for k, w in (("dev", dev_w), ("cpu", cpu_w), ("init", init))
    }
    moved = float((flat["cpu"] - flat["init"]).norm())
    assert moved > 0, "training did not move the weights"
    gap = float((flat["dev"] - flat["cpu"]).norm())
    assert gap <= 0.02 * moved, f"device vs CPU weights differ by {gap / moved:.2%} of the move"


def _edm(
    device: str, *, steps: int, dp: DPSGDConfig | None = None, seed: int = 0
) -> EDMDiffusionFactory:
    return EDMDiffusionFactory(
        unet=TINY_UNET,
        edm=EDMConfig(sampling_steps=4),
        training=EDMTrainingConfig(
            steps=steps, batch_size=32, seed=seed, device=device, dp=dp, sample_batch_size=8
        ),
        class_id=0,
        client_id=0,
    )


# -- exact latent statistics ----------------------------------------------------------


def _latents(n: int, dim: int, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Latents that exercise both clipping steps, with every class present."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, dim)) * 0.6
    z[::7] *= 40.0  # peaks far above R: scaled by R / max|z_i|
    z[3::11] = 0.9  # max|z_i| < R but ||z|| = 0.9 sqrt(d) > R: integer re-clipping
    labels = rng.integers(0, num_classes, size=n)
    labels[:num_classes] = np.arange(num_classes)
    return z, labels.astype(np.int64)


@pytest.mark.parametrize(
    ("n", "dim", "num_classes", "bits", "batch_size"),
    [
        (3000, 6, 10, None, 257),  # automatic grid, several batches
        (2000, 5, 3, 24, 16384),  # L = 2**48: float64 Gram sums flushed every 32 rows
        (1500, 290, 100, None, 4096),  # many classes: one shared Gram buffer, 4 bands
    ],
    ids=["auto-bits", "gram-flushes", "many-classes"],
)
def test_latent_statistics_are_bit_identical_on_device(
    n: int, dim: int, num_classes: int, bits: int | None, batch_size: int
) -> None:
    z, y = _latents(n, dim, num_classes, seed=dim)
    config = LatentStatisticsConfig(
        dim=dim, num_classes=num_classes, clip_norm=1.0, max_records=4096, fractional_bits=bits
    )
    assert (np.abs(z).max(axis=1) > 1.0).any() and (
        (np.abs(z).max(axis=1) <= 1.0) & (np.linalg.norm(z, axis=1) > 1.0)
    ).any(), "the data must exercise both clipping steps"
    if bits == 24:
        assert config.exact_batch_size == 32
    kwargs = {"num_classes": num_classes, "clip_norm": 1.0, "config": config}
    cpu = compute_latent_statistics(z, y, device="cpu", **kwargs)
    on_device = compute_latent_statistics(
        torch.from_numpy(z).to(DEVICE),
        torch.from_numpy(y).to(DEVICE),
        device=DEVICE,
        batch_size=batch_size,
        **kwargs,
    )
    assert isinstance(on_device, LatentStatistics)
    assert np.array_equal(on_device.counts, np.bincount(y, minlength=num_classes))
    assert np.array_equal(on_device.sums, cpu.sums)
    assert np.array_equal(on_device.second_moments, cpu.second_moments)
    assert on_device == cpu
    assert np.abs(cpu.second_moments).max() > 0 and np.abs(cpu.sums).max() > 0
    # float32 inputs on the device: converted exactly, so the same bits again.
    z32 = z.astype(np.float32)
    assert compute_latent_statistics(
        torch.from_numpy(z32).to(DEVICE), y, device=DEVICE, **kwargs
    ) == compute_latent_statistics(z32, y, device="cpu", **kwargs)


def test_accumulator_streams_and_quantizes_identically_on_device() -> None:
    z, y = _latents(900, 8, 4, seed=1)
    config = LatentStatisticsConfig(dim=8, num_classes=4, clip_norm=1.0, max_records=2000)
    reference = LatentStatisticsAccumulator(config, device="cpu")
    reference.update(z, y)
    acc = LatentStatisticsAccumulator(config, device=DEVICE, batch_size=100)
    acc.update(z[:300], y[:300])  # numpy
    acc.update(torch.from_numpy(z[300:600]), torch.from_numpy(y[300:600]))  # CPU tensors
    acc.update(torch.from_numpy(z[600:]).to(DEVICE), torch.from_numpy(y[600:]).to(DEVICE))
    assert acc.result() == reference.result()

    q = acc.quantize(torch.from_numpy(z).to(DEVICE))
    _assert_on_device([q])
    assert q.dtype == torch.int64
    q_cpu = reference.quantize(torch.from_numpy(z))
    assert torch.equal(q.cpu(), q_cpu)
    assert int((q_cpu * q_cpu).sum(dim=1).max()) <= config.norm_bound_squared

    # A NaN on the device is refused, and the failed update changes nothing.
    bad = torch.from_numpy(z[:10]).to(DEVICE)
    bad[4, 2] = float("nan")
    before = acc.result()
    with pytest.raises(NonFiniteInputError):
        acc.update(bad, torch.from_numpy(y[:10]).to(DEVICE))
    assert acc.result() == before


# -- codecs -----------------------------------------------------------------------------


def test_pca_codec_runs_on_the_inputs_device(digits: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, _ = digits
    codec = PCACodec.fit(x[:300], latent_dim=12)  # fitted on the CPU, as the pipeline does
    z = codec.encode(x[300:400].to(DEVICE))
    back = codec.decode(z)
    _assert_on_device([z, back])
    torch.testing.assert_close(z.cpu(), codec.encode(x[300:400]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(back.cpu(), codec.decode(z.cpu()), atol=1e-4, rtol=1e-4)


def _tiny_vae(path: Path) -> None:
    from diffusers import AutoencoderKL

    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(0)  # CPU only: torch.manual_seed seeds CUDA too
        model = AutoencoderKL(
            in_channels=3,
            out_channels=3,
            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
            block_out_channels=(8, 8),
            layers_per_block=1,
            latent_channels=2,
            norm_num_groups=4,
            sample_size=8,
            scaling_factor=0.5,
        )
    model.save_pretrained(path)


def test_diffusers_codec_on_device_matches_cpu(
    tmp_path: Path, digits: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, _ = digits
    _tiny_vae(tmp_path / "vae")
    cpu = DiffusersCodec.from_pretrained(tmp_path / "vae", kind="kl", image_shape=(1, 8, 8))
    dev = DiffusersCodec.from_pretrained(
        tmp_path / "vae", kind="kl", image_shape=(1, 8, 8), device=DEVICE
    )
    _assert_on_device(list(dev._model.parameters()))
    z = dev.encode(x[:40], batch_size=16)
    assert z.device.type == "cpu" and z.shape == (40, 32)  # documented: latents on the CPU
    with _no_tf32():
        torch.testing.assert_close(z, cpu.encode(x[:40]), atol=1e-4, rtol=1e-4)
        images = dev.decode(z, batch_size=16)
        torch.testing.assert_close(images, cpu.decode(z), atol=1e-4, rtol=1e-4)
    assert images.shape == (40, 1, 8, 8) and images.device.type == "cpu"
    assert 0.0 <= float(images.min()) <= float(images.max()) <= 1.0


# -- classifier and scoring ---------------------------------------------------------


def test_classifier_trains_on_device_and_scores_like_the_cpu(
    digits: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = digits
    model = train_classifier(x[:1200], y[:1200], num_classes=10, epochs=6, seed=1, device=DEVICE)
    _assert_on_device(list(model.parameters()))
    assert not model.training
    acc = evaluate_classifier(model, x[1200:], y[1200:], device=DEVICE)
    assert acc > 0.85, f"accuracy {acc:.3f} on {DEVICE}"
    # The same weights on the CPU: the device's scores agree up to rounding.
    cpu_model = copy.deepcopy(model).cpu()
    assert evaluate_classifier(cpu_model, x[1200:], y[1200:]) == pytest.approx(acc, abs=0.01)
    p_dev = true_class_probabilities(model, x[1200:], y[1200:], device=DEVICE, batch_size=128)
    p_cpu = true_class_probabilities(cpu_model, x[1200:], y[1200:])
    assert p_dev.dtype == np.float64 and p_dev.shape == (len(y) - 1200,)
    np.testing.assert_allclose(p_dev, p_cpu, atol=1e-2)
    losses = per_example_losses(model, x[1200:], y[1200:], device=DEVICE)
    np.testing.assert_allclose(losses, -np.log(p_dev), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("what", ["classifier", "edm", "edm-dp", "conv-ae", "fedavg"])
def test_seeded_training_leaves_the_global_rng_alone(
    what: str, digits: tuple[torch.Tensor, torch.Tensor]
) -> None:
    # train_classifier documents that the caller's global RNG state is left
    # untouched; the EDM factory initialises "under a private RNG state so the
    # caller's global torch RNG is neither consumed nor reset"; the autoencoder
    # codec and FedAvg (CPU only) seed under torch.random.fork_rng too.  On a
    # CUDA machine this must hold for the device's generator as well.
    x, y = digits
    # A state that no seeding with the library's seed (3, offset 0) reproduces.
    torch.manual_seed(20240229)
    torch.rand(5)
    if DEVICE_TYPE == "cuda":
        torch.rand(5, device=DEVICE)
    before = _rng_states()
    if what == "classifier":
        train_classifier(x[:200], y[:200], num_classes=10, epochs=1, seed=3, device=DEVICE)
    elif what == "conv-ae":
        ConvAutoencoderCodec.fit(x[:64], latent_dim=4, epochs=1, seed=3)
    elif what == "fedavg":
        run_fedavg([(x[:64], y[:64]), (x[64:128], y[64:128])], num_classes=10, rounds=1, seed=3)
    else:
        dp = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.5) if what == "edm-dp" else None
        _edm(DEVICE, steps=1, dp=dp, seed=3).fit(x[y == 1][:16])
    after = _rng_states()
    assert torch.equal(after[0], before[0]), "the global CPU RNG state changed"
    if len(before) > 1:
        assert torch.equal(after[1], before[1]), f"the global {DEVICE} RNG state changed"


# -- EDM diffusion factory and DP-SGD -------------------------------------------------


def test_edm_factory_fits_samples_and_reloads_on_device(
    tmp_path: Path, digits: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = digits
    images = x[y == 0][:64]
    with _no_tf32():
        factory = _edm(DEVICE, steps=12).fit(images)
        cpu = _edm("cpu", steps=12).fit(images)
    _assert_on_device(list(factory._model.parameters()))
    assert len(factory.loss_history) == 12 and all(map(math.isfinite, factory.loss_history))
    # Same seed, same CPU-drawn batches, σ and noise: the device trains like the CPU.
    np.testing.assert_allclose(factory.loss_history, cpu.loss_history, rtol=1e-2)
    _assert_same_trajectory(factory, cpu, images.shape[1:], seed=0)

    out = factory.sample(10, torch.Generator().manual_seed(3))  # two chunks of 8 and 2
    assert out.shape == (10, 1, 8, 8) and out.dtype == torch.float32
    assert out.device.type == "cpu" and bool(torch.isfinite(out).all())
    assert 0.0 <= float(out.min()) <= float(out.max()) <= 1.0
    assert torch.equal(factory.sample(10, torch.Generator().manual_seed(3)), out)
    assert factory.sample(0).shape == (0, 1, 8, 8)

    noisy = images[:5] + 0.1 * torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    den = factory.denoise(noisy, 0.1)
    assert den.shape == (5, 1, 8, 8) and den.device.type == "cpu"
    assert bool(torch.isfinite(den).all())

    factory.save(tmp_path / "factory")
    loaded = EDMDiffusionFactory.load(tmp_path / "factory", device=DEVICE)
    _assert_on_device(list(loaded._model.parameters()))
    assert loaded.weights_sha256() == factory.weights_sha256()
    assert loaded.manifest().training["device"] == DEVICE
    assert torch.equal(loaded.sample(10, torch.Generator().manual_seed(3)), out)


class _Linear(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim))


def _linear_loss(
    params: dict[str, torch.Tensor], x: torch.Tensor, aux: torch.Tensor
) -> torch.Tensor:
    # d loss / dw = -x: each record's raw gradient norm is ||x||.
    return -(params["w"] @ x) + 0 * aux.sum()


def test_dp_sgd_step_clips_and_scales_on_device() -> None:
    data = torch.tensor([[10.0, 0.0], [0.0, 0.5], [0.0, -0.5], [6.0, 8.0]], device=DEVICE)
    model = _Linear(2).to(DEVICE)
    count = dp_sgd_step(
        model,
        _linear_loss,
        data,
        DPSGDConfig(noise_multiplier=1e-9, clip_norm=1.0, sampling_rate=1.0, max_physical_batch=3),
        torch.optim.SGD(model.parameters(), lr=1.0),
        batch_generator=torch.Generator().manual_seed(0),
        noise=GaussianNoiseSource(torch.Generator().manual_seed(0)),
        draw_aux=lambda n: torch.zeros(n, 1, device=DEVICE),
    )
    assert count == 4
    _assert_on_device([model.w])
    clipped = torch.tensor([[1.0, 0.0], [0.0, 0.5], [0.0, -0.5], [0.6, 0.8]])
    torch.testing.assert_close(model.w.detach().cpu(), clipped.sum(0) / 4, atol=1e-6, rtol=0)


@pytest.mark.parametrize("source", ["csprng", "cpu-generator", "device-generator"])
def test_noise_sources_deliver_standard_normals_on_device(source: str) -> None:
    generator = {
        "csprng": None,
        "cpu-generator": torch.Generator().manual_seed(0),
        "device-generator": torch.Generator(device=DEVICE).manual_seed(0),
    }[source]
    noise = GaussianNoiseSource(generator)
    out = noise.standard_normal((100, 200), torch.device(DEVICE))
    _assert_on_device([out])
    assert out.shape == (100, 200) and out.dtype == torch.float32
    # 20,000 draws: the mean's standard error is 0.007 and the std's 0.005, so each bound
    # is about 7 standard errors: false-failure rate below 1e-11 (the CSPRNG case is
    # unseeded; the seeded cases are deterministic).
    assert abs(float(out.mean())) < 0.05 and abs(float(out.std()) - 1.0) < 0.05


def test_dp_sgd_edm_factory_on_device_matches_the_cpu(
    digits: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = digits
    images = x[y == 2][:24]
    dp = DPSGDConfig(noise_multiplier=1.0, sampling_rate=0.5, max_physical_batch=8)
    with _no_tf32():
        factory = _edm(DEVICE, steps=3, dp=dp).fit(images)
        cpu = _edm("cpu", steps=3, dp=dp).fit(images)
    _assert_on_device(list(factory._model.parameters()))
    record = factory.privacy
    assert (record.mechanism, record.steps, record.seeded) == ("dp-sgd", 3, True)
    assert record.noise_multiplier == 1.0 and record.sampling_rate == 0.5
    # Same seeded Poisson batches, diffusion draws and DP noise (all drawn on the
    # CPU): the clipped, noised updates must agree with the CPU's.
    _assert_same_trajectory(factory, cpu, images.shape[1:], seed=0)
    out = factory.sample(4, torch.Generator().manual_seed(0))
    assert out.shape == (4, 1, 8, 8) and bool(torch.isfinite(out).all())


# -- pipelines and the CLI ------------------------------------------------------------

TINY_LATENT = {
    "num_clients": 6,
    "samples_per_class": 100,
    "classifier_epochs": 8,
    "latent_dim": 6,
    "dropout_rate": 0.34,
    "baselines": False,
    "noise_seed": 5,
}


@pytest.mark.parametrize("codec", ["pca", "diffusers"])
def test_latent_pipeline_on_device_agrees_with_the_cpu(codec: str, tmp_path: Path) -> None:
    kind = None
    if codec == "diffusers":
        _tiny_vae(tmp_path / "vae")
        codec, kind = str(tmp_path / "vae"), "kl"
    with _no_tf32():  # TF32 convolutions would move the diffusers latents by many grid steps
        runs = {
            device: run_pipeline(
                PipelineConfig(codec=codec, codec_kind=kind, device=device, **TINY_LATENT)
            )
            for device in ("cpu", DEVICE)
        }
    cpu, dev = runs["cpu"], runs[DEVICE]
    r = dev.report
    assert r.config["device"] == DEVICE and "secagg" in r.seconds
    assert r.records_aggregated == cpu.report.records_aggregated > 0
    assert r.dropped_clients == cpu.report.dropped_clients
    assert np.array_equal(dev.aggregate.counts, cpu.aggregate.counts)
    # The codec's float32 latents may differ in the last bits between devices,
    # which can move a record by one grid step per coordinate; nothing more.
    slack = dev.aggregate.counts[:, None]
    assert (np.abs(dev.aggregate.sums - cpu.aggregate.sums) <= slack).all()
    assert 0.0 <= r.accuracy_synthetic <= 1.0
    if codec == "pca":
        assert r.accuracy_synthetic > 0.5, (
            f"(CPU: 0.80) synthetic accuracy {r.accuracy_synthetic:.3f}"
        )
    assert dev.synthetic_images.shape == cpu.synthetic_images.shape
    assert np.isfinite(dev.synthetic_images).all()
    # The audit's quantized member latents come from the device's accumulator.
    assert dev.audit_inputs is not None and cpu.audit_inputs is not None
    grid = math.ldexp(1.0, -r.fractional_bits)
    np.testing.assert_allclose(
        dev.audit_inputs.member_latents, cpu.audit_inputs.member_latents, atol=1.5 * grid
    )
    assert r.audit is not None and r.audit.to_dict()["attacks"]


def test_cli_latent_run_on_device(tmp_path: Path) -> None:
    args = ["run", "--clients", "4", "--samples-per-class", "20", "--epochs", "1"]
    args += ["--latent-dim", "4", "--partition", "iid", "--noise-seed", "1", "--no-audit"]
    args += ["--baselines"]  # the real-data baseline is opt-in: it trains on the device too
    code = main([*args, "--quiet", "--device", DEVICE, "--output-dir", str(tmp_path)])
    assert code == 0
    release = json.loads((tmp_path / "release.json").read_text())
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert release["public"]["config"]["device"] == DEVICE
    assert "secagg" in report["seconds"] and release["public"]["num_clients"] == 4
    assert 0.0 <= report["accuracy_synthetic"] <= 1.0
    assert 0.5 < report["accuracy_real"] <= 1.0  # the real-data baseline, trained on the device


def test_cli_factory_run_on_device(tmp_path: Path) -> None:
    args = ["run", "--engine", "factory", "--epochs", "8", "--fedavg-rounds", "1"]
    args += ["--samples-per-class", "100", "--no-baselines", "--no-audit", "--quiet"]
    code = main([*args, "--device", DEVICE, "--output-dir", str(tmp_path)])
    assert code == 0
    release = json.loads((tmp_path / "release.json").read_text())
    report = json.loads((tmp_path / "evaluation.json").read_text())
    assert report["engine"] == "factory" and release["public"]["config"]["device"] == DEVICE
    assert report["num_factories"] == 10
    assert report["factory_accuracy"] > 0.6  # classifier trained on the device (CPU: 0.85)


def test_factory_pipeline_with_dp_edm_factories_on_device() -> None:
    config = FactoryPipelineConfig(
        factory="edm",
        unet=TINY_UNET,
        edm=EDMConfig(sampling_steps=2),
        edm_training=EDMTrainingConfig(
            steps=2, dp=DPSGDConfig(noise_multiplier=1.5, sampling_rate=0.1)
        ),
        synthetic_per_class=4,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit_config=FactoryAuditConfig(max_factories=2),
        device=DEVICE,
    )
    report = run_factory_pipeline(config)
    assert report.num_factories == 10 and report.dp_epsilon is not None
    assert report.dp_epsilon > 0 and math.isfinite(report.dp_epsilon)
    for cell in report.matrix.cells:
        factory = report.matrix.factory(*cell)
        assert isinstance(factory, EDMDiffusionFactory) and factory.privacy.mechanism == "dp-sgd"
        _assert_on_device(list(factory._model.parameters()))
    assert report.matrix.buffer.images.shape[1:] == (1, 8, 8)
    assert bool(torch.isfinite(report.matrix.buffer.images).all())
    assert 0.0 <= report.factory_accuracy <= 1.0
    # The audit scored two diffusion factories through their denoiser on the device.
    assert report.audit is not None
    assert report.audit.summary()["denoising-loss"]["factories"] == 2
