"""The factory job (``privfed run --engine factory``) as a Flower app.

Each node takes its own partition (:func:`privfed.engines.factory.job.load_partitions`),
fits one factory per class it holds (:func:`~privfed.engines.factory.job.make_factory`,
the job's own recipe and seeds) and ships each once: the checksummed
``manifest.json`` and ``weights.safetensors`` a factory's ``save`` writes, as
bytes (``query.privfed_factory_fit``), with its fit's wall-clock seconds.  The
server verifies every factory
(:func:`~privfed.engines.factory.registry.load_factory` checks both checksums
before any tensor is read; the manifest must name the node's own client --
the Flower node that delivered it -- and a class of the dataset), registers it
in a :class:`~privfed.engines.factory.matrix.FactoryMatrix` and runs the
engine's own server stage (:func:`~privfed.engines.factory.job.downstream_stage`:
synthesis, downstream classifier, evaluation).  It writes the artefacts of
``privfed run --engine factory`` (a
:class:`~privfed.engines.factory.report.FactoryPipelineReport` and its
``write``: ``release.json``, ``synthetic.npz``, ``samples.png``,
``evaluation.json``, the model card) into ``output-dir``, plus
:data:`FACTORY_RESULT_FILE` (``factory_flower.json``: the transport's facts --
clients, refused nodes, shipped bytes, the matrix digest -- and the
unlearning certificate; evaluation, not part of the release).  The Flower job
trains no baselines (FedAvg, centralized) and runs no audit: they need every
client's private data in one place; ``evaluation.json`` says ``None`` for them.

With ``unlearn-client`` set, that client's column is removed, the
:class:`~privfed.engines.factory.matrix.UnlearningCertificate` is written into
``factory_flower.json`` and the classifier is retrained without it; the
release (synthetic data) and ``evaluation.json`` are those of the matrix
after unlearning, ``factory_flower.json`` has the accuracy before and after.

Run config (``[tool.flwr.app.config]`` of ``examples/flower_app``, which
declares every key): the job's configuration, :data:`CONFIG_KEYS` --
``num-clients``, ``dataset``, ``seed``, ``scenario``, ``dirichlet-alpha``,
``factory`` (``"gaussian"``, ``"mixture"``; ``"edm"`` works but trains diffusion
models on each node), ``mixture-components``, ``min-records-per-factory``,
``synthetic-per-class`` and, where the latent job reads the same setting with
another default, ``factory-latent-dim``, ``factory-classifier-epochs``,
``factory-classifier`` (``"cnn"`` or ``"mlp"``), ``factory-public-fraction`` and
``factory-test-fraction`` -- and the server's :data:`SERVER_KEYS`:
``unlearn-client`` (-1: none), ``output-dir``, ``overwrite``, ``release-only``
(write the release alone; refused with ``unlearn-client``, whose certificate is
evaluation output), ``timeout`` and ``wait-s``.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from privfed._atomic import atomic_write_text
from privfed.errors import (
    ArtifactIntegrityError,
    MessageFormatError,
    ParameterError,
    PrivfedError,
    ProtocolAbort,
)
from privfed.flower import _wire
from privfed.flower._log import LOG
from privfed.flower.server import wait_for_federation

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch
    from numpy.typing import NDArray

    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.factory.job import DownstreamResult
    from privfed.engines.factory.matrix import FactoryMatrix
    from privfed.engines.factory.report import FactoryPipelineReport
    from privfed.engines.job import StageClock

__all__ = [
    "CONFIG_KEYS",
    "FACTORY_ACTION",
    "FACTORY_RESULT_FILE",
    "RUN_CONFIG_KEYS",
    "SERVER_KEYS",
    "add_factory_handlers",
    "factory_config",
    "factory_main",
    "receive_factories",
    "unlearn_client",
]

#: Flower action of the fit-and-ship request.
FACTORY_ACTION: Final = "privfed_factory_fit"
#: The Flower job's own evaluation file, next to ``privfed run``'s artefacts in ``output-dir``.
FACTORY_RESULT_FILE: Final = "factory_flower.json"
_MANIFEST, _WEIGHTS = "manifest.json", "weights.safetensors"

#: Run-config keys of the job's configuration: key -> (``FactoryPipelineConfig`` field, type).
#: Settings the latent job reads under the same key with another default take a
#: ``factory-`` prefix, so that one app config serves both jobs.
CONFIG_KEYS: Final[Mapping[str, tuple[str, type]]] = {
    "dataset": ("dataset", str),
    "num-clients": ("num_clients", int),
    "scenario": ("scenario", str),
    "dirichlet-alpha": ("dirichlet_alpha", float),
    "factory": ("factory", str),
    "factory-latent-dim": ("latent_dim", int),
    "min-records-per-factory": ("min_records_per_factory", int),
    "synthetic-per-class": ("synthetic_per_class", int),
    "factory-classifier-epochs": ("classifier_epochs", int),
    "factory-classifier": ("classifier", str),
    "mixture-components": ("mixture_components", int),
    "seed": ("seed", int),
    "factory-public-fraction": ("public_fraction", float),
    "factory-test-fraction": ("test_fraction", float),
}
#: Run-config keys the server reads besides the configuration, with the value a
#: missing key takes.  ``output-dir``, ``overwrite``, ``timeout`` and ``wait-s``
#: are shared with the latent job (the app config's value applies to both).
SERVER_KEYS: Final[Mapping[str, object]] = {
    "unlearn-client": -1,
    "output-dir": "runs/flower-factory",
    "overwrite": False,
    "release-only": False,
    "timeout": 600.0,
    "wait-s": 300.0,
    "join-grace-s": 15.0,
}
#: Every run-config key the factory job reads (the app folder must declare each).
RUN_CONFIG_KEYS: Final = frozenset(CONFIG_KEYS) | frozenset(SERVER_KEYS)


def _convert(key: str, value: object, kind: type) -> Any:
    """A run-config value as ``kind``, or a ParameterError naming ``key``."""
    if kind is str:
        if isinstance(value, str):
            return value
    elif not isinstance(value, bool) and isinstance(value, int | float):
        if kind is float:
            return float(value)
        if isinstance(value, int):
            return value
    raise ParameterError(key, f"a {kind.__name__}", value)


def _server_value(run: Mapping[str, Any], key: str) -> Any:
    """A server key's value (its :data:`SERVER_KEYS` default when missing)."""
    return run.get(key, SERVER_KEYS[key])


def factory_config(run: Mapping[str, Any]) -> FactoryPipelineConfig:
    """The :class:`~privfed.engines.factory.config.FactoryPipelineConfig` a run config names.

    Reads the keys of :data:`CONFIG_KEYS`; missing ones take the job's
    defaults.  The Flower job trains no baselines and runs no audit (they
    need every client's private data in one place).

    Raises:
        ParameterError: A value of the wrong type (naming its key) or outside
            its domain (the config's own checks).
    """
    from privfed.engines.factory.config import FactoryPipelineConfig

    fields: dict[str, Any] = {"centralized": False, "audit": False}
    for key, (name, kind) in CONFIG_KEYS.items():
        if key in run:
            fields[name] = _convert(key, run[key], kind)
    return FactoryPipelineConfig(**fields)


def unlearn_client(run: Mapping[str, Any], num_clients: int) -> int | None:
    """The client ``unlearn-client`` names, or ``None`` (-1, the default: none).

    Raises:
        ParameterError (parameter ``unlearn-client``): Not -1 and not a client
            id of the run (an int in ``[0, num_clients)``).
    """
    value = _server_value(run, "unlearn-client")
    if isinstance(value, bool) or not isinstance(value, int) or not -1 <= value < num_clients:
        raise ParameterError(
            "unlearn-client",
            f"-1 (none) or a client id of the run, an int in [0, {num_clients})",
            value,
        )
    return None if value == -1 else value


# -- the node ------------------------------------------------------------------------------


def _fit_and_ship(message: Message, context: Context) -> Message:
    import numpy as np
    import torch

    from privfed.engines.factory.job import load_partitions, make_factory, public_codec
    from privfed.engines.job import torch_threads

    config = factory_config(dict(context.run_config))
    pid = int(context.node_config["partition-id"])
    k_classes, split, parts = load_partitions(config)
    if not 0 <= pid < len(parts):
        raise ParameterError("partition-id", f"an int in [0, {len(parts)})", pid)
    images = torch.from_numpy(np.array(split.private.images))
    labels = torch.from_numpy(np.array(split.private.labels))
    idx = torch.from_numpy(parts[pid])
    fields: dict[str, Any] = {}
    count = 0
    # The job's threads, as in process (so a node fits the factory the job would).
    with torch_threads(config.num_threads), tempfile.TemporaryDirectory() as tmp:
        codec = public_codec(config)
        for c in range(k_classes):
            cls_idx = idx[labels[idx] == c]
            if cls_idx.numel() < config.min_records_per_factory:
                continue
            factory = make_factory(config, c, pid, codec=codec, sample_count=int(cls_idx.numel()))
            start = time.perf_counter()
            factory.fit(images[cls_idx])
            fields[f"{count}.seconds"] = time.perf_counter() - start
            folder = Path(factory.save(Path(tmp) / f"f{count}"))
            fields[f"{count}.manifest"] = (folder / _MANIFEST).read_bytes()
            fields[f"{count}.weights"] = (folder / _WEIGHTS).read_bytes()
            count += 1
    fields["count"] = count
    return Message(RecordDict({_wire.RECORD: ConfigRecord(fields)}), reply_to=message)


def add_factory_handlers(app: ClientApp) -> ClientApp:
    """Register the fit-and-ship handler (``query.privfed_factory_fit``) on ``app``."""
    app.query(FACTORY_ACTION)(_fit_and_ship)
    return app


# -- the server ------------------------------------------------------------------------------


def receive_factories(
    record: ConfigRecord, *, client_id: int, num_classes: int, codec: Any
) -> list[tuple[int, Any, int]]:
    """Verify one node's shipped factories; ``[(class, factory, sample_count)]``.

    Args:
        record: The node's reply record.
        client_id: The client the delivering node is (never what a manifest claims).
        num_classes: Classes of the dataset.
        codec: The public codec of Gaussian factories (``None`` otherwise).

    Raises:
        ArtifactIntegrityError: A checksum fails or a manifest is malformed.
        ProtocolAbort: A manifest names another client or an unknown class.
    """
    from privfed.engines.factory.registry import load_factory

    out: list[tuple[int, Any, int]] = []
    count = _wire.get_int(record, "count")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            folder = Path(tmp) / f"f{i}"
            folder.mkdir()
            manifest = _wire.get_bytes(record, f"{i}.manifest")
            (folder / _MANIFEST).write_bytes(manifest)
            (folder / _WEIGHTS).write_bytes(_wire.get_bytes(record, f"{i}.weights"))
            is_gaussian = _shipped_type(manifest) != "edm-diffusion"
            factory = load_factory(folder, codec=codec if is_gaussian else None)
            claimed = factory.manifest()
            if claimed.client_id != client_id:
                raise ProtocolAbort(
                    f"a factory names client {claimed.client_id} but was delivered by {client_id}"
                )
            if claimed.class_id is None or not 0 <= claimed.class_id < num_classes:
                raise ProtocolAbort(f"a factory of client {client_id} names an unknown class")
            out.append((int(claimed.class_id), factory, int(claimed.sample_count)))
    return out


def _shipped_type(raw: bytes) -> object:
    """The ``factory_type`` a shipped manifest names, read before its checksums are checked.

    The bytes come from a node, so whatever they hold (not UTF-8, not JSON,
    nested past the parser's depth, not an object) is an
    :class:`ArtifactIntegrityError`, which refuses that node alone.
    """
    try:
        manifest = json.loads(raw.decode())
        inner = manifest.get("manifest", manifest) if isinstance(manifest, dict) else None
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        inner = None
    if not isinstance(inner, dict):
        raise ArtifactIntegrityError(_MANIFEST, "the manifest is not a JSON object")
    return inner.get("factory_type")


def _check_cells(matrix: Any, client_id: int, received: list[tuple[int, Any, int]]) -> None:
    """Refuse a node's factories that the matrix would refuse, before any is registered.

    A class twice, a count below one, or an image shape unlike the matrix's
    (or unlike the node's own other factories) refuses the node as a whole,
    so that no node is ever registered in part.
    """
    from privfed.engines.factory.matrix import FactoryMatrix

    staged = FactoryMatrix()
    if len(matrix):  # the shape to match: one factory already registered
        c, k = matrix.cells[0]
        staged.register(c, k, matrix.factory(c, k), matrix.count(c, k))
    for class_id, factory, count in received:
        staged.register(class_id, client_id, factory, count)


def _fit_seconds(record: ConfigRecord, count: int) -> list[float]:
    """The fit seconds a node reports for each of its ``count`` factories (evaluation)."""
    seconds = []
    for i in range(count):
        value = record.get(f"{i}.seconds")
        # NaN fails both comparisons; an infinity the second.
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < math.inf
        ):
            raise MessageFormatError(f"the privfed record lacks the seconds field '{i}.seconds'")
        seconds.append(float(value))
    return seconds


def factory_main(grid: Grid, run: Mapping[str, Any]) -> dict[str, Any]:
    """The job's server side inside a ServerApp's ``main``; returns ``factory_flower.json``.

    Checks the run config and ``output-dir`` before any node is contacted,
    collects and verifies the nodes' factories, runs the engine's server stage
    and writes the artefacts of ``privfed run --engine factory`` (see the
    module docstring).

    Args:
        grid: The ServerApp's grid.
        run: The run config (keys: :data:`RUN_CONFIG_KEYS`).

    Returns:
        The content of ``factory_flower.json`` (also when ``release-only``,
        which does not write it).

    Raises:
        ParameterError: A bad run config (``unlearn-client`` not a client id
            of the run, ``release-only`` with ``unlearn-client``, ...) or an
            ``output-dir`` the run may not write into; raised before any node
            is contacted.
        ProtocolAbort: Too few nodes answered, or no factory was accepted.
    """
    from privfed.engines.job import check_output_dir, run_job

    config = factory_config(run)
    forget = unlearn_client(run, config.num_clients)
    output = Path(str(_server_value(run, "output-dir")))
    overwrite = bool(_server_value(run, "overwrite"))
    release_only = bool(_server_value(run, "release-only"))
    if release_only and forget is not None:
        raise ParameterError(
            "release-only",
            f"false when unlearn-client is set (the unlearning certificate is evaluation "
            f"output, written to {FACTORY_RESULT_FILE})",
            True,
        )
    check_output_dir(output, overwrite=overwrite)
    return run_job(
        config.device,
        config.num_threads,
        None,
        lambda clock: _serve(grid, run, config, clock, forget, output, overwrite, release_only),
    )


def _serve(
    grid: Grid,
    run: Mapping[str, Any],
    config: FactoryPipelineConfig,
    clock: StageClock,
    forget: int | None,
    output: Path,
    overwrite: bool,
    release_only: bool,
) -> dict[str, Any]:
    """:func:`factory_main` after its checks, under the job's device and threads."""
    import numpy as np
    import torch

    from privfed.engines.factory.job import downstream_stage, load_partitions, public_codec

    partitions = wait_for_federation(
        grid,
        {
            "wait-s": _server_value(run, "wait-s"),
            "join-grace-s": _server_value(run, "join-grace-s"),
        },
        config.num_clients,
    )
    # A node declaring a partition-id outside [0, num-clients) was left out there.
    k_classes, split, _ = load_partitions(config)  # the server uses only the test split
    start = time.perf_counter()
    codec = public_codec(config)
    codec_seconds = time.perf_counter() - start if codec is not None else 0.0
    if codec is not None:
        clock.seconds["codec"] = round(codec_seconds, 4)
        clock.step("codec", 1, 1)

    clock.start("factories")
    got = _collect_factories(
        grid, partitions, config.num_clients, k_classes, codec, float(_server_value(run, "timeout"))
    )
    clock.finish("factories")
    if len(got.matrix) == 0:
        raise ProtocolAbort("no factory was accepted")

    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))
    first = downstream_stage(config, got.matrix, k_classes, test_x, test_y, clock)
    doc: dict[str, Any] = {
        "kind": "evaluation: accuracy on real test data; factories are the clients' release",
        "transport": "flower",
        "clients": sorted(partitions.values()),
        "num_factories": len(got.matrix),
        "matrix_digest": got.matrix.digest(),
        "factory_bytes_per_client": (
            float(np.mean(list(got.shipped.values()))) if got.shipped else 0.0
        ),
        "shipped_bytes": {str(k): v for k, v in sorted(got.shipped.items())},
        "refused": {str(k): v for k, v in got.refused.items()},
        "accuracy": first.accuracy,
    }
    final = first
    if forget is not None:
        if _unlearn(forget, got, doc):
            final = downstream_stage(
                config,
                got.matrix,
                k_classes,
                test_x,
                test_y,
                clock,
                consumer="downstream-classifier-after-unlearning",
            )
        doc["accuracy_after_unlearning"] = final.accuracy

    report = _pipeline_report(config, got, final, test_x, test_y, codec_seconds, clock)
    report.write(output, overwrite=overwrite, release_only=release_only)
    _write_flower_result(output, doc, release_only)
    print(  # a release-only run states no evaluation number, not even in its log
        f"privfed factory job over Flower: {len(got.matrix)} factories"
        + ("" if release_only else f", accuracy {final.accuracy:.4f}")
        + (f"; client {forget} unlearned" if forget is not None else "")
        + f"; artefacts in {output}"
    )
    return doc


@dataclass
class _Collected:
    """What the server gathered from the nodes' factory replies."""

    matrix: FactoryMatrix
    #: client -> bytes of its reply.
    shipped: dict[int, int]
    #: client -> why its factories were refused.
    refused: dict[int, str]
    #: Weight bytes of each client's accepted factories.
    weights: list[int]
    #: Records behind each (class, client) factory, shape (classes, clients).
    counts: NDArray[np.int64]
    #: Each accepted factory's fit seconds.
    fit_seconds: list[float]


def _collect_factories(
    grid: Grid,
    partitions: Mapping[int, int],
    num_clients: int,
    k_classes: int,
    codec: Any,
    timeout: float,
) -> _Collected:
    """Ask every node for its factories; verify and register each, refusing a node's bad ones."""
    import numpy as np

    from privfed.engines.factory.job import weight_bytes
    from privfed.engines.factory.matrix import FactoryMatrix

    messages = [
        Message(
            RecordDict(),
            dst_node_id=node,
            message_type=f"query.{FACTORY_ACTION}",
            group_id="factories",
        )
        for node in partitions
    ]
    got = _Collected(
        matrix=FactoryMatrix(),
        shipped={},
        refused={},
        weights=[0] * num_clients,
        counts=np.zeros((k_classes, num_clients), dtype=np.int64),
        fit_seconds=[],
    )
    for reply in grid.send_and_receive(messages, timeout=timeout):
        pid = partitions.get(int(reply.metadata.src_node_id))
        if pid is None or reply.has_error():
            continue
        if pid in got.shipped or pid in got.refused:  # one reply a node: the first counts
            LOG.warning("ignored a second reply from client %d", pid)
            continue
        try:
            record = _wire.config_record(reply.content)
            received = receive_factories(record, client_id=pid, num_classes=k_classes, codec=codec)
            seconds = _fit_seconds(record, len(received))
            _check_cells(got.matrix, pid, received)
        except (PrivfedError, ValueError) as exc:
            got.refused[pid] = str(exc)
            LOG.warning("refused the factories of client %d: %s", pid, exc)
            continue
        got.shipped[pid] = _wire.content_bytes(reply.content)
        got.fit_seconds.extend(seconds)
        for class_id, factory, count in received:
            got.matrix.register(class_id, pid, factory, count)
            got.weights[pid] += weight_bytes(factory)
            got.counts[class_id, pid] = count
    return got


def _unlearn(forget: int, got: _Collected, doc: dict[str, Any]) -> bool:
    """Remove ``forget``'s column and record its certificate in ``doc``; False if it had none."""
    if not any(client == forget for _, client in got.matrix.cells):
        doc["unlearning_certificate"] = None
        doc["unlearning_note"] = (
            f"client {forget} holds no factory in the matrix (none shipped or accepted): "
            "nothing to remove, and the release has none of its data"
        )
        return False
    certificate = got.matrix.remove_client(forget)
    if not got.matrix.verify(certificate):  # pragma: no cover -- the matrix's own guarantee
        raise ProtocolAbort("the unlearning certificate does not verify")
    got.counts[:, forget] = 0
    doc["unlearning_certificate"] = certificate.to_dict()
    doc["unlearning_certificate_sha256"] = hashlib.sha256(
        certificate.to_json().encode()
    ).hexdigest()
    return True


def _pipeline_report(
    config: FactoryPipelineConfig,
    got: _Collected,
    final: DownstreamResult,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    codec_seconds: float,
    clock: StageClock,
) -> FactoryPipelineReport:
    """The report whose artefacts ``privfed run --engine factory`` writes, of the final matrix."""
    import numpy as np

    from privfed.engines.factory.report import FactoryPipelineReport

    return FactoryPipelineReport(
        config=config,
        factory_accuracy=final.accuracy,
        fedavg_accuracy=None,
        centralized_accuracy=None,
        num_factories=len(got.matrix),
        factory_bytes_per_client=float(np.mean(got.weights)),
        fedavg_bytes_per_client=None,
        factory_seconds=tuple(got.fit_seconds),
        synthesis_seconds=final.synthesis_seconds,
        class_counts=tuple(tuple(int(v) for v in row) for row in got.counts),
        dp_epsilon=None,
        matrix=got.matrix,
        test_images=test_x,
        test_labels=test_y,
        codec_seconds=codec_seconds,
        seconds=dict(clock.seconds),
        synthetic=final.synthetic,
    )


def _write_flower_result(output: Path, doc: dict[str, Any], release_only: bool) -> None:
    """Write :data:`FACTORY_RESULT_FILE` atomically; under release-only remove an earlier one."""
    result = output / FACTORY_RESULT_FILE
    if release_only:
        result.unlink(missing_ok=True)  # an earlier full run's: never two runs' files together
    else:
        atomic_write_text(result, json.dumps(doc, indent=2, sort_keys=True) + "\n")
