"""The factory job's report: ``release.json``, ``evaluation.json`` and the run's artefacts."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privfed.engines.artifacts import AuditInputs
from privfed.engines.factory.audit import (
    FactoryAuditReport,
)
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.matrix import FactoryMatrix, SyntheticDataset
from privfed.engines.job import (
    RunArtifacts,
    WritesArtifacts,
    evaluation_document,
    release_document,
)

__all__ = ["FACTORY_RELEASE_LIMITATIONS", "FactoryPipelineReport"]


#: What a factory release discloses outside any DP guarantee (stated in every release.json).
FACTORY_RELEASE_LIMITATIONS = (
    "which (class, client) cells trained a factory (ledger entries, classes present in the "
    "synthetic data) and the synthesis quotas (proportional to each cell's exact record count) "
    "are derived from private data without noise; the DP mechanism (DP-SGD or the Gaussian "
    "release of latent moments) covers each factory's weights only"
)


#: Header of a factory ``release.json`` with DP: it states the limitations, never contradicts them.
FACTORY_RELEASE_NOTICE = (
    "RELEASE: the factories' weights and the synthetic data drawn from them are differentially "
    "private (each factory traceable to an entry of ledger.json), beside public facts declared "
    "by the operator. Not covered (dp.limitations): which (class, client) cells trained a "
    "factory and the synthesis quotas follow the exact per-cell record counts."
)
#: Header of a factory ``release.json`` without DP.
FACTORY_NO_DP_NOTICE = (
    "RELEASE WITHOUT DIFFERENTIAL PRIVACY: the factories were trained without DP-SGD, so "
    "nothing in this release is covered by a privacy guarantee (dp.limitations lists what "
    "follows the exact per-cell record counts)."
)


@dataclass(frozen=True)
class FactoryPipelineReport(WritesArtifacts):
    """Outcome of :func:`run_factory_pipeline` (accuracies in [0, 1]).

    Attributes:
        config: The configuration run.
        factory_accuracy: Test accuracy of the classifier trained on synthetic data.
        fedavg_accuracy: Test accuracy of FedAvg on the same split, or ``None``
            when no FedAvg baseline ran (the job over Flower:
            :mod:`privfed.flower.factory_app`).
        centralized_accuracy: Test accuracy on pooled private data, or ``None``.
        num_factories: Factories registered in the matrix.
        factory_bytes_per_client: Mean bytes of safetensors weights a client ships
            (:func:`weight_bytes`, averaged over every client).
        fedavg_bytes_per_client: Mean bytes a FedAvg client sends and receives,
            or ``None`` when no FedAvg baseline ran.
        factory_seconds: Wall-clock training seconds of each factory.
        synthesis_seconds: Wall-clock seconds of synthesis.
        class_counts: Count matrix ``n_{c,k}`` (rows = classes 0..9, columns =
            clients).  Over Flower the server knows only the counts the shipped
            manifests state: cells without a factory count 0 there.
        dp_epsilon: ε at ``config.delta`` of the factory releases, from the
            privacy ledger (replace-one adjacency, PLD accounting), or
            ``None`` without DP-SGD.  Factories of different cells are
            trained on disjoint records and compose in parallel.
        matrix: The matrix with its synthetic buffer (not serialised).
        test_images: Real held-out test images (not serialised).
        test_labels: Their labels (not serialised).
        audit: The membership-inference audit, or ``None`` when
            ``config.audit`` is off.
        codec_seconds: Seconds spent fitting the public codec (0 without one).
        seconds: Wall-clock seconds per stage.
        synthetic: The synthetic dataset the classifier was trained on (not
            serialised).
        ledger: The run's privacy ledger when the factories were trained with
            DP-SGD, else ``None``.
        factory_accuracy_repeats: The accuracy's spread over ``config.repeats``
            classifier seeds (``seeds``, ``values``, ``mean``, ``std``, ``min``,
            ``max``, ``note``; ``factory_accuracy`` is its mean), or ``None``
            where the classifier was not trained by the in-process job.
        audit_inputs: Pixel vectors of members (the factories' training
            records), non-members (the test split), the synthetic data and the
            public reference, for ``privfed audit --run-dir`` (``None`` when the
            audit was off; private data: keep it as private as the records).
    """

    config: FactoryPipelineConfig
    factory_accuracy: float
    fedavg_accuracy: float | None
    centralized_accuracy: float | None
    num_factories: int
    factory_bytes_per_client: float
    fedavg_bytes_per_client: float | None
    factory_seconds: tuple[float, ...]
    synthesis_seconds: float
    class_counts: tuple[tuple[int, ...], ...]
    dp_epsilon: float | None
    matrix: FactoryMatrix = field(repr=False, compare=False)
    test_images: torch.Tensor = field(repr=False, compare=False)
    test_labels: torch.Tensor = field(repr=False, compare=False)
    audit: FactoryAuditReport | None = field(default=None, compare=False)
    codec_seconds: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)
    synthetic: SyntheticDataset | None = field(default=None, repr=False, compare=False)
    ledger: Any = field(default=None, repr=False, compare=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False, compare=False)
    factory_accuracy_repeats: dict[str, Any] | None = field(default=None, compare=False)

    def release_dict(self) -> dict[str, Any]:
        """``release.json``: the public configuration and the DP guarantee, if any.

        Without DP-SGD the factories are **not** differentially private (the
        audit measures what they leak) and the release says so.  Exact per-cell
        counts, the number of factories (which cells held enough records) and
        the bytes shipped are derived from private data: they are in
        :meth:`evaluation_dict` only.
        """
        dp: dict[str, Any]
        if self.ledger is None:
            dp = {
                "guarantee": None,
                "warning": "no differential privacy: the factories were trained without DP-SGD",
            }
        else:
            ledger_text = self.ledger.to_json()
            guarantee = self.ledger.guarantee(self.config.delta)
            dp = {
                "epsilon": guarantee.epsilon,
                "delta": guarantee.delta,
                "adjacency": None if guarantee.adjacency is None else guarantee.adjacency.value,
                "mechanism": _dp_mechanism(self.config),
                "accountant": f"privfed.dp.PrivacyLedger ({guarantee.method})",
                "ledger_sha256": hashlib.sha256(ledger_text.encode()).hexdigest(),
            }
            if self.config.epsilon is not None:
                dp["target_epsilon"] = self.config.epsilon
                dp["calibration"] = (
                    "noise multiplier per (class, client) cell: "
                    "privfed.dp.calibrate_noise_multiplier (PLD, replace-one) for the cell's "
                    "realised Poisson rate and steps"
                    if self.config.factory == "edm"
                    # The release's words stay as published (the planner's old name).
                    else "noise per (class, client) cell: privfed.dp.plan_latent_release "
                    "(exact joint sensitivity of the sum and second moment, replace-one, "
                    "the codec's public clip radius)"
                )
                if self.config.factory == "edm" and self.config.dp_sampling_rate is None:
                    dp["sampling_rate_disclosure"] = (
                        "each cell samples at batch_size / n_{c,k}: the ledger's rates disclose "
                        "the exact per-cell record counts (as the synthesis quotas do)"
                    )
        # Not covered by any guarantee (see SECURITY.md): which cells trained a factory, and
        # the synthesis quotas, follow the exact per-cell record counts.
        dp["limitations"] = FACTORY_RELEASE_LIMITATIONS
        return release_document(
            "factory",
            public={"config": self.config.to_dict()},
            dp=dp,
            samples_per_class=self.config.synthetic_per_class,
            notice=FACTORY_RELEASE_NOTICE if self.ledger is not None else FACTORY_NO_DP_NOTICE,
        )

    def evaluation_dict(self) -> dict[str, Any]:
        """``evaluation.json``: accuracies, exact counts, bytes, timings and the audit."""
        body = self.to_dict()
        body.pop("config")
        return evaluation_document("factory", body)

    def artifacts(self, *, release_only: bool = False) -> RunArtifacts:
        """The run's artefacts, for :func:`privfed.engines.job.write_artifacts`."""
        images = labels = None
        if self.synthetic is not None:
            images = self.synthetic.images.detach().cpu().numpy()
            labels = self.synthetic.labels.detach().cpu().numpy()
        return RunArtifacts(
            release=json.loads(json.dumps(self.release_dict())),
            evaluation=None if release_only else json.loads(json.dumps(self.evaluation_dict())),
            ledger=self.ledger,
            sample_images=images,
            sample_labels=labels,
            audit_inputs=None if release_only else self.audit_inputs,
            ledger_explanation=None if self.ledger is None else _FACTORY_LEDGER_FORM,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the matrix and test tensors)."""
        secs = self.factory_seconds
        return {
            "config": self.config.to_dict(),
            "factory_accuracy": self.factory_accuracy,
            "factory_accuracy_repeats": self.factory_accuracy_repeats,
            "fedavg_accuracy": self.fedavg_accuracy,
            "centralized_accuracy": self.centralized_accuracy,
            "num_factories": self.num_factories,
            "factory_bytes_per_client": self.factory_bytes_per_client,
            "fedavg_bytes_per_client": self.fedavg_bytes_per_client,
            "factory_seconds_mean": float(np.mean(secs)) if secs else 0.0,
            "factory_seconds_max": float(np.max(secs)) if secs else 0.0,
            "synthesis_seconds": self.synthesis_seconds,
            "class_counts": [list(row) for row in self.class_counts],
            "dp_epsilon": self.dp_epsilon,
            "gaussian_basis": self.config.gaussian_basis if self.config.factory != "edm" else None,
            "codec_seconds": self.codec_seconds,
            "audit": None if self.audit is None else self.audit.to_dict(),
            "seconds": dict(self.seconds),
            "seconds_total": round(sum(self.seconds.values()), 4),
        }


def _dp_mechanism(config: FactoryPipelineConfig) -> str:
    """``release.json``'s ``dp.mechanism``: the factory kind's DP mechanism, in words."""
    if config.factory == "edm" or config.epsilon is None:
        return "DP-SGD (Poisson-subsampled Gaussian) per (class, client) factory"
    if config.factory == "mixture":
        return (
            "Gaussian mechanism on the per-component count, clipped latent sum and second "
            "moment (each record in the component of its nearest public anchor) per "
            "(class, client) mixture factory (public codec)"
        )
    return (
        "Gaussian mechanism on the clipped latent sum and second moment "
        "per (class, client) factory (public codec)"
    )


#: What the factory ledger's numbers mean (``ledger.json``'s ``explanation``).
_FACTORY_LEDGER_FORM: dict[str, Any] = {
    "form": "normalised",
    "summary": (
        "One entry per (class, client) factory. Each entry states its mechanism with unit "
        "sensitivity: l2_sensitivity is 1.0 and noise_std is the noise multiplier (the "
        "noise std divided by the mechanism's L2 sensitivity: the clipping bound for "
        "DP-SGD, the whitened joint sensitivity for the Gaussian statistics factories). "
        "Privacy depends only on that ratio (and, for subsampled entries, the sampling "
        "rate and steps), so the ledger's guarantee is release.json's dp.epsilon at dp.delta."
    ),
}
