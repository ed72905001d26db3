"""The Flower training examples: examples/flower_secagg_training and examples/flower_dp_training.

Fast tests import each example's own modules (its folder on ``sys.path``, as
``flwr run`` puts the installed app) and run its ServerApp and ClientApp over
the in-process grid double (:class:`LoopbackGrid`), for 1-2 rounds on the
bundled digits or a tiny ``.npz``.  Two of them replace the example's local
training with a known update, so the result can be checked exactly:

* SecAgg example: the global model after one round is FedAvg's weighted mean
  of the nodes' weights (weights: their train-split sizes) within one grid
  step ``2 * clipping_range / quantization_range`` per coordinate (stochastic
  rounding), plus float32 rounding;
* DP example: the same of the updates clipped to L2 norm ``clipping-norm`` by
  ``fixedclipping_mod``, plus the DP wrapper's Gaussian noise, whose empirical
  standard deviation over the ~60k weights is ``z * C / m`` within 3% and whose
  mean is 0 within 6 standard errors.

The slow tests run ``flwr run`` of each folder as a user does (venv ``bin``
on PATH, a fresh ``FLWR_HOME``, 3 simulated nodes, 2 rounds) and stop every
process whose environment names that Flower home.
"""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("torch", reason="the examples need privfed[engines]")
pytest.importorskip("sklearn", reason="the examples need privfed[engines]")

import torch
from flower_helpers import flower_env, flower_home
from flwr.app import Context, RecordDict, UserConfig
from flwr.server.workflow.constant import MAIN_PARAMS_RECORD

from privfed.flower import _wire
from sdist import sdist_members

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "secagg": ("flower_secagg_training", "privfed_secagg_training"),
    "dp": ("flower_dp_training", "privfed_dp_training"),
}
NODES = 3
STEP = 2 * 8.0 / 2**22  # the examples' clipping-range and quantization-range


def example(name: str) -> types.SimpleNamespace:
    """The example's ``task``, ``client_app`` and ``server_app`` modules."""
    folder, package = EXAMPLES[name]
    path = str(ROOT / "examples" / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
    return types.SimpleNamespace(
        **{
            m: importlib.import_module(f"{package}.{m}")
            for m in ("task", "client_app", "server_app")
        }
    )


def run_config(name: str, tmp_path: Path, **overrides: Any) -> UserConfig:
    """The example's run config (its pyproject.toml), journals in ``tmp_path``, with overrides."""
    folder, _ = EXAMPLES[name]
    pyproject = tomllib.loads((ROOT / "examples" / folder / "pyproject.toml").read_text())
    config: UserConfig = dict(pyproject["tool"]["flwr"]["app"]["config"])
    config["journal-dir"] = str(tmp_path / "journals")
    config.update(overrides)
    return config


def tiny_npz(tmp_path: Path, channels_last: bool = False) -> str:
    """60 random 28x28 uint8 images (MNIST's shape; (N, 28, 28, 1) if channels_last)."""
    rng = np.random.default_rng(3)
    shape = (60, 28, 28, 1) if channels_last else (60, 28, 28)
    path = tmp_path / "tiny.npz"
    np.savez(path, images=rng.integers(0, 256, shape, dtype=np.uint8), labels=np.arange(60) % 10)
    return str(path)


def run_server(
    loopback: type, ex: types.SimpleNamespace, config: UserConfig, partitions: int = NODES
) -> tuple[Any, Any]:
    """Run the example's ServerApp over NODES in-process nodes; (grid, the server's Context).

    Node ``i`` holds partition ``i`` of ``partitions`` (more partitions: less data each).
    """

    class Grid(loopback):  # type: ignore[misc,valid-type]
        @property
        def run(self) -> Any:  # DefaultWorkflow reads the run id
            return types.SimpleNamespace(run_id=1)

    grid = Grid(ex.client_app.app, NODES, run_config=config)
    for node in grid.contexts.values():
        node.node_config["num-partitions"] = partitions
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=config)
    ex.server_app.app(grid, context)
    return grid, context


def final_weights(context: Context) -> list[npt.NDArray[np.float32]]:
    return context.state.array_records[MAIN_PARAMS_RECORD].to_numpy_ndarrays()  # type: ignore[no-any-return]


def only_masked_vectors_left_the_nodes(grid: Any) -> bool:
    """Every array a node sent is privfed's masked ring vector (no model array, no float)."""
    arrays = [
        (name, array.numpy().dtype)
        for reply in grid.delivered
        if reply.has_content()
        for name, record in reply.content.array_records.items()
        for array in record.values()
    ]
    return bool(arrays) and all(n == _wire.ARRAYS and d == np.uint64 for n, d in arrays)


def shift_of(trainloader: Any) -> float:
    """A node's known update: every weight moves by this (from its own labels)."""
    labels = torch.cat([y for _, y in trainloader])
    return 0.002 * (1 + int(labels.sum()) % 50)


def known_update(
    net: torch.nn.Module, trainloader: Any, valloader: Any, *_: Any
) -> dict[str, float]:
    """Stands in for the example's ``train``: add :func:`shift_of` to every weight."""
    with torch.no_grad():
        for p in net.parameters():
            p.add_(shift_of(trainloader))
    return {"val_loss": 1.0, "val_accuracy": 0.5}


def nodes_data(ex: types.SimpleNamespace, config: UserConfig) -> list[tuple[int, float]]:
    """(train-split size, :func:`shift_of`) of each node, as its client_fn loads them."""
    out = []
    for pid in range(NODES):
        trainloader, _ = ex.task.load_data(pid, NODES, 8, str(config["npz-path"]))
        out.append((len(trainloader.dataset), shift_of(trainloader)))
    return out


# -- the SecAgg+ example -----------------------------------------------------------------


@pytest.mark.slow
def test_secagg_example_trains_on_digits_and_no_model_leaves_a_node(
    loopback: type, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = example("secagg")
    config = run_config("secagg", tmp_path, **{"num-server-rounds": 2, "fraction-evaluate": 1.0})
    start = ex.task.get_weights(ex.task.make_net(ex.task.input_shape("")))
    grid, context = run_server(loopback, ex, config, partitions=20)  # ~90 digits a node
    out = capsys.readouterr().out
    for r in (1, 2):
        assert f"privfed: round {r}: {NODES} of {NODES} nodes securely aggregated" in out
    final = final_weights(context)
    assert [a.shape for a in final] == [a.shape for a in start]  # (1, 32, 32) digits
    assert all(np.isfinite(a).all() for a in final)
    assert any(not np.array_equal(a, b) for a, b in zip(final, start, strict=True))
    assert only_masked_vectors_left_the_nodes(grid)


def test_secagg_example_aggregate_is_fedavg_of_the_nodes(
    loopback: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = example("secagg")
    npz = tiny_npz(tmp_path)
    config = run_config("secagg", tmp_path, **{"num-server-rounds": 1, "npz-path": npz})
    monkeypatch.setattr(ex.client_app, "train", known_update)
    _, context = run_server(loopback, ex, config)
    start = ex.task.get_weights(ex.task.make_net((1, 28, 28)))  # the model follows the data
    data = nodes_data(ex, config)
    mean_shift = sum(n * s for n, s in data) / sum(n for n, _ in data)
    for got, base in zip(final_weights(context), start, strict=True):
        want = base.astype(np.float64) + mean_shift
        assert got.shape == base.shape
        assert np.max(np.abs(got - want)) < STEP + 2**-22


# -- the central-DP example --------------------------------------------------------------


def test_dp_example_trains_on_digits(
    loopback: type, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = example("dp")
    overrides = {"num-server-rounds": 1, "num-sampled-clients": NODES, "noise-multiplier": 0.01}
    config = run_config(
        "dp", tmp_path, **overrides, **{"reconstruction-threshold": 2}, noise="central"
    )
    grid, context = run_server(loopback, ex, config, partitions=20)
    out = capsys.readouterr()
    assert f"privfed: round 1: {NODES} of {NODES} nodes securely aggregated" in out.out
    final = final_weights(context)
    assert final[0].shape == (6, 1, 3, 3) and final[2].shape == (16, 6, 5, 5)  # 28x28 input
    assert all(np.isfinite(a).all() for a in final)
    assert only_masked_vectors_left_the_nodes(grid)


def test_dp_example_clips_then_aggregates_then_the_server_adds_the_noise(
    loopback: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = example("dp")
    z, clip = 0.5, 10.0
    config = run_config(
        "dp", tmp_path,
        **{"num-server-rounds": 1, "num-sampled-clients": NODES, "reconstruction-threshold": 2},
        **{"noise-multiplier": z, "clipping-norm": clip, "npz-path": tiny_npz(tmp_path, True)},
        noise="central",
    )  # fmt: skip
    monkeypatch.setattr(ex.client_app, "train", known_update)
    _, context = run_server(loopback, ex, config)
    start = ex.task.get_weights(ex.task.make_net((1, 28, 28)))
    size = sum(a.size for a in start)
    data = nodes_data(ex, config)
    # fixedclipping_mod scales each node's update to L2 norm <= clip.
    clipped = [(n, s * min(1.0, clip / (abs(s) * np.sqrt(size)))) for n, s in data]
    assert any(c < s for (_, c), (_, s) in zip(clipped, data, strict=True))  # some were clipped
    mean_shift = sum(n * c for n, c in clipped) / sum(n for n, _ in clipped)
    residual = np.concatenate(
        [
            (got.astype(np.float64) - base - mean_shift).ravel()
            for got, base in zip(final_weights(context), start, strict=True)
        ]
    )
    sigma = z * clip / NODES
    assert abs(residual.std() / sigma - 1) < 0.03
    assert abs(residual.mean()) < 6 * sigma / np.sqrt(size)


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["distributed-skellam", "distributed-gaussian"])
def test_dp_example_with_distributed_noise_trains_and_writes_its_ledger(
    loopback: type, tmp_path: Path, capsys: pytest.CaptureFixture[str], noise: str
) -> None:
    ex = example("dp")
    config = run_config(
        "dp", tmp_path, noise=noise,
        **{"num-server-rounds": 2, "num-sampled-clients": NODES, "reconstruction-threshold": 2},
        **{"output-dir": str(tmp_path / "out"), "num-shares": NODES},
    )  # fmt: skip
    grid, context = run_server(loopback, ex, config, partitions=20)
    out = capsys.readouterr().out
    for r in (1, 2):
        assert f"privfed: round {r}: {NODES} of {NODES} nodes securely aggregated" in out
    assert f"distributed {noise.split('-')[1].replace('gaussian', 'discrete-gaussian')}" in out
    final = final_weights(context)
    assert all(np.isfinite(a).all() for a in final)
    assert only_masked_vectors_left_the_nodes(grid)
    ledger = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert len(ledger["releases"]) == 2
    document = json.loads((tmp_path / "out" / "dp_training.json").read_text())
    assert document["epsilon_spent"] <= 8.0 and "trusted" in document["plan"]["trust"]


# -- the data ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_data_follow_the_file(name: str, tmp_path: Path) -> None:
    task = example(name).task
    side = task.DIGITS_SIDE
    assert task.input_shape("") == (1, side, side)
    images, labels = task.load_images("")
    assert images.shape == (1797, 1, side, side) and labels.shape == (1797,)
    assert images.min() >= -1.0 and images.max() <= 1.0
    for channels_last in (False, True):
        folder = tmp_path / f"channels-last-{channels_last}"
        folder.mkdir()
        npz = tiny_npz(folder, channels_last)
        assert task.input_shape(npz) == (1, 28, 28)
        trainloader, testloader = task.load_data(1, NODES, 8, npz)
        assert len(trainloader.dataset) + len(testloader.dataset) == 20
        assert trainloader.dataset[0][0].shape == (1, 28, 28)
    # The partitions cover every record once.
    sizes = [sum(len(d.dataset) for d in task.load_data(p, 4, 8, "")) for p in range(4)]
    assert sum(sizes) == 1797
    bad = tmp_path / "bad.npz"
    np.savez(bad, images=np.zeros((4, 28, 28), np.uint8), labels=np.array([0, 1, 2, 10]))
    with pytest.raises(ValueError, match="labels must be in"):
        task.load_images(str(bad))
    with pytest.raises(ValueError, match="partition-id"):
        task.load_data(NODES, NODES, 8, "")


# -- packaging -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_fab_flwr_run_builds_carries_the_package(name: str) -> None:
    """``flwr run`` installs the FAB built from the folder: the app's own modules are in it."""
    from flwr.cli.build import build_fab_from_disk

    folder, package = EXAMPLES[name]
    fab = build_fab_from_disk(ROOT / "examples" / folder)
    names = set(zipfile.ZipFile(io.BytesIO(fab)).namelist())
    modules = {f"{package}/{m}.py" for m in ("__init__", "task", "client_app", "server_app")}
    assert modules | {"pyproject.toml", "README.md"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    components = tomllib.loads((ROOT / "examples" / folder / "pyproject.toml").read_text())
    assert components["tool"]["flwr"]["app"]["components"] == {
        "serverapp": f"{package}.server_app:app",
        "clientapp": f"{package}.client_app:app",
    }


@pytest.mark.slow
def test_the_sdist_carries_both_examples(tmp_path: Path) -> None:
    members = sdist_members(tmp_path)
    for folder, package in EXAMPLES.values():
        for rel in (
            "pyproject.toml",
            "README.md",
            f"{package}/task.py",
            f"{package}/server_app.py",
        ):
            assert f"examples/{folder}/{rel}" in members
    assert "tests/flower/test_training_examples.py" in members


# -- flwr run ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("name", "run"),
    [
        ("secagg", "num-server-rounds=2 local-epochs=1"),
        (
            "dp",
            "num-server-rounds=2 local-epochs=1 num-sampled-clients=3 reconstruction-threshold=2 "
            'noise="central"',
        ),
        (
            "dp",
            "num-server-rounds=2 local-epochs=1 num-sampled-clients=3 reconstruction-threshold=2 "
            'noise="distributed-skellam"',
        ),
    ],
)
def test_flwr_run_of_the_example_completes_its_rounds(name: str, run: str, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    folder, _ = EXAMPLES[name]
    bin_dir = Path(sys.executable).parent
    with flower_home(tmp_path) as home:
        env = flower_env(home, XDG_STATE_HOME=str(tmp_path / "state"))
        argv = [
            str(bin_dir / "flwr"), "run", str(ROOT / "examples" / folder), "--stream",
            "--federation-config", f"num-supernodes={NODES}",
            "--run-config", f'{run} journal-dir="{tmp_path / "journals"}"',
        ]  # fmt: skip
        done = subprocess.run(
            argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "ServerApp raised" not in log and "Traceback" not in log, log[-3000:]
    assert "Run finished 2 round(s)" in log, log[-3000:]
    for r in (1, 2):
        assert f"privfed: round {r}: {NODES} of {NODES} nodes securely aggregated" in log
    journals = sorted((tmp_path / "journals").glob("node-*.jsonl"))
    assert len(journals) == NODES  # the run config reached the nodes' mod
