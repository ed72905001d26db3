"""The factory job (``privfed run --engine factory``) as a Flower app.

Each node takes its own partition (:func:`privfed.engines.factory.job.load_partitions`),
fits one factory per class it holds (:func:`~privfed.engines.factory.job.make_factory`,
the job's own recipe and seeds) and ships each once: the checksummed
``manifest.json`` and ``weights.safetensors`` a factory's ``save`` writes, as
bytes (``query.privfed_factory_fit``).  The server verifies every factory
(:func:`~privfed.engines.factory.registry.load_factory` checks both checksums
before any tensor is read; the manifest must name the node's own client --
the Flower node that delivered it -- and a class of the dataset), registers it
in a :class:`~privfed.engines.factory.matrix.FactoryMatrix`, synthesizes,
trains the downstream classifier and evaluates it.  With ``unlearn-client``
set, that client's column is removed and the
:class:`~privfed.engines.factory.matrix.UnlearningCertificate` is written
next to the results (and the classifier retrained without it).

Run config: ``num-clients``, ``factory`` (``"gaussian"``; ``"edm"`` works but
trains diffusion models on each node), ``scenario``, ``latent-dim``,
``min-records-per-factory``, ``synthetic-per-class``, ``classifier-epochs``,
``seed``, ``unlearn-client`` (-1: none), ``output-dir``, ``timeout``, ``wait-s``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from privfed.errors import ParameterError, PrivfedError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower.server import hello, wait_for_nodes

__all__ = [
    "FACTORY_ACTION",
    "FACTORY_RESULT_FILE",
    "add_factory_handlers",
    "factory_config",
    "factory_main",
    "receive_factories",
]

_LOG = logging.getLogger("privfed.flower")

#: Flower action of the fit-and-ship request.
FACTORY_ACTION: Final = "privfed_factory_fit"
#: What the server writes into ``output-dir``.
FACTORY_RESULT_FILE: Final = "factory_flower.json"
_MANIFEST, _WEIGHTS = "manifest.json", "weights.safetensors"

_KEYS = {
    "dataset": ("dataset", str),
    "num-clients": ("num_clients", int),
    "scenario": ("scenario", str),
    "factory": ("factory", str),
    "latent-dim": ("latent_dim", int),
    "min-records-per-factory": ("min_records_per_factory", int),
    "synthetic-per-class": ("synthetic_per_class", int),
    "classifier-epochs": ("classifier_epochs", int),
    "seed": ("seed", int),
    "public-fraction": ("public_fraction", float),
    "test-fraction": ("test_fraction", float),
}


def factory_config(run: Mapping[str, Any]) -> Any:
    """The :class:`~privfed.engines.factory.job.FactoryPipelineConfig` a run config names.

    The Flower job trains no baselines and runs no audit (they need every
    client's private data in one place).
    """
    from privfed.engines.factory.job import FactoryPipelineConfig

    fields: dict[str, Any] = {"centralized": False, "audit": False}
    for key, (name, kind) in _KEYS.items():
        if key in run:
            fields[name] = kind(run[key])
    # The latent job's defaults in the shared app config do not apply here.
    if "factory-latent-dim" in run:
        fields["latent_dim"] = int(run["factory-latent-dim"])
    return FactoryPipelineConfig(**fields)


# -- the node ------------------------------------------------------------------------------


def _fit_and_ship(message: Message, context: Context) -> Message:
    import numpy as np
    import torch

    from privfed.engines.factory.job import load_partitions, make_factory, public_codec

    config = factory_config(dict(context.run_config))
    pid = int(context.node_config["partition-id"])
    k_classes, split, parts = load_partitions(config)
    if not 0 <= pid < len(parts):
        raise ParameterError("partition-id", f"an int in [0, {len(parts)})", pid)
    images = torch.from_numpy(np.array(split.private.images))
    labels = torch.from_numpy(np.array(split.private.labels))
    idx = torch.from_numpy(parts[pid])
    codec = public_codec(config)
    fields: dict[str, Any] = {}
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for c in range(k_classes):
            cls_idx = idx[labels[idx] == c]
            if cls_idx.numel() < config.min_records_per_factory:
                continue
            factory = make_factory(config, c, pid, codec=codec, sample_count=int(cls_idx.numel()))
            factory.fit(images[cls_idx])
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
            (folder / _MANIFEST).write_bytes(_wire.get_bytes(record, f"{i}.manifest"))
            (folder / _WEIGHTS).write_bytes(_wire.get_bytes(record, f"{i}.weights"))
            manifest = json.loads((folder / _MANIFEST).read_text())
            is_gaussian = manifest.get("manifest", manifest).get("factory_type") != "edm-diffusion"
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


def factory_main(grid: Grid, run: Mapping[str, Any]) -> dict[str, Any]:
    """The job's server side inside a ServerApp's ``main``; returns the result document.

    Raises:
        ProtocolAbort: Too few nodes answered, or no factory was accepted.
    """
    import numpy as np
    import torch

    from privfed.engines.classifier import evaluate_classifier
    from privfed.engines.factory.job import load_partitions, public_codec, train_downstream
    from privfed.engines.factory.matrix import FactoryMatrix

    config = factory_config(run)
    wait = float(run.get("wait-s", 300.0))
    nodes = wait_for_nodes(grid, config.num_clients, timeout=wait)
    partitions = hello(grid, nodes, timeout=wait)
    k_classes, split, _ = load_partitions(config)  # the server uses only the test split
    codec = public_codec(config)
    messages = [
        Message(
            RecordDict(),
            dst_node_id=node,
            message_type=f"query.{FACTORY_ACTION}",
            group_id="factories",
        )
        for node in partitions
    ]
    matrix = FactoryMatrix()
    shipped: dict[int, int] = {}
    refused: dict[int, str] = {}
    timeout = float(run.get("timeout", 600.0))
    for reply in grid.send_and_receive(messages, timeout=timeout):
        pid = partitions.get(int(reply.metadata.src_node_id))
        if pid is None or reply.has_error():
            continue
        record = _wire.config_record(reply.content)
        try:
            received = receive_factories(record, client_id=pid, num_classes=k_classes, codec=codec)
        except (PrivfedError, ValueError) as exc:
            refused[pid] = str(exc)
            _LOG.warning("refused the factories of client %d: %s", pid, exc)
            continue
        shipped[pid] = _wire.content_bytes(reply.content)
        for class_id, factory, count in received:
            matrix.register(class_id, pid, factory, count)
    if len(matrix) == 0:
        raise ProtocolAbort("no factory was accepted")

    test_x = torch.from_numpy(np.array(split.test.images))
    test_y = torch.from_numpy(np.array(split.test.labels))

    def train_and_test(tag: str) -> float:
        synthetic = matrix.synthesize(config.synthetic_per_class, seed=config.seed)
        model = train_downstream(config, synthetic.images, synthetic.labels, k_classes)
        matrix.record_consumer(tag, synthetic)
        return float(evaluate_classifier(model, test_x, test_y, device=config.device))

    accuracy = train_and_test("downstream-classifier")
    doc: dict[str, Any] = {
        "kind": "evaluation: accuracy on real test data; factories are the clients' release",
        "transport": "flower",
        "clients": sorted(partitions.values()),
        "num_factories": len(matrix),
        "matrix_digest": matrix.digest(),
        "factory_bytes_per_client": float(np.mean(list(shipped.values()))) if shipped else 0.0,
        "refused": {str(k): v for k, v in refused.items()},
        "accuracy": accuracy,
    }
    forget = int(run.get("unlearn-client", -1))
    if forget >= 0:
        certificate = matrix.remove_client(forget)
        if not matrix.verify(certificate):  # pragma: no cover -- the matrix's own guarantee
            raise ProtocolAbort("the unlearning certificate does not verify")
        doc["unlearning_certificate"] = certificate.to_dict()
        doc["unlearning_certificate_sha256"] = hashlib.sha256(
            certificate.to_json().encode()
        ).hexdigest()
        doc["accuracy_after_unlearning"] = train_and_test("downstream-classifier-after-unlearning")
    output = Path(str(run.get("output-dir", "runs/flower-factory")))
    output.mkdir(parents=True, exist_ok=True)
    (output / FACTORY_RESULT_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(
        f"privfed factory job over Flower: {len(matrix)} factories, accuracy {accuracy:.4f}"
        + (f"; client {forget} unlearned" if forget >= 0 else "")
    )
    return doc
