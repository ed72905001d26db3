"""The latent job's report: ``release.json``, ``evaluation.json`` and the run's artefacts."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfed._records import field_dict
from privfed.data import (
    DatasetSplit,
)
from privfed.dp import PrivacyLedger
from privfed.engines.codecs import Codec
from privfed.engines.job import (
    RunArtifacts,
    WritesArtifacts,
    evaluation_document,
    release_document,
)
from privfed.engines.latent.audit import (
    AuditInputs,
    AuditSkipped,
    AuditSummary,
)
from privfed.engines.latent.gaussians import ClassGaussians
from privfed.engines.latent.release import (
    NoisyLatentStatistics,
)
from privfed.engines.latent.statistics import (
    LatentStatistics,
)

__all__ = ["PipelineReport", "PipelineResult"]


@dataclass(frozen=True)
class PipelineReport:
    """What one run measured (JSON-serialisable through :meth:`to_dict`).

    Accuracies are top-1 on the held-out real test split, in ``[0, 1]``;
    baseline accuracies are ``None`` when ``baselines`` was off.  ``audit`` is
    the :class:`~privfed.engines.latent.audit.AuditSummary` (``None`` when the
    audit was off; an :class:`~privfed.engines.latent.audit.AuditSkipped` when
    the data were too few).
    """

    config: dict[str, Any]
    accuracy_synthetic: float
    accuracy_real: float | None
    accuracy_nondp_synthetic: float | None
    epsilon: float
    delta: float
    mu: float
    noise_std_sum: float
    noise_std_second_moment: float
    noise_std_count: float
    clip_norm: float
    latent_dim: int
    fractional_bits: int
    payload_values_per_class: int
    payload_values_per_client: int
    payload_bytes_per_client: int
    secagg_bytes_per_client: float
    num_clients: int
    empty_clients: int
    dropped_clients: dict[str, list[int]]
    records_public: int
    records_private: int
    records_aggregated: int
    records_test: int
    seconds: dict[str, float]
    ledger: dict[str, Any]
    audit: AuditSummary | AuditSkipped | None = None
    secagg_threshold: int = 0
    noisy_class_counts: tuple[float, ...] | None = None
    distributed: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    accuracy_repeats: dict[str, Any] | None = None
    num_threads_used: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Everything the run measured, as one plain dict (release and evaluation together).

        This view mixes DP outputs with numbers computed from private data
        without noise; it is for the Python caller.  What a run directory holds
        is split: :meth:`release_dict` and :meth:`evaluation_dict`.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["audit"] = None if self.audit is None else self.audit.to_dict()
        plain: dict[str, Any] = json.loads(json.dumps(out))
        return plain

    def release_dict(self) -> dict[str, Any]:
        """``release.json``: DP outputs and public facts only.

        Public facts are what the operator declared (the configuration, the
        codec's dimension, the clip norm and the ring's grid, which follow from
        it and from public bounds) and the protocol's own facts (threshold,
        scripted dropouts).  DP outputs are the plan's guarantee and noise
        stds, the ledger's guarantee and digest, and -- when counts are private
        (add/remove) -- the noisy class counts of the release.
        """
        ledger_text = json.dumps(self.ledger, sort_keys=True)
        dp: dict[str, Any] = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mu": self.mu,
            "adjacency": self.config["adjacency"],
            "noise_std_sum": self.noise_std_sum,
            "noise_std_second_moment": self.noise_std_second_moment,
            "noise_std_count": self.noise_std_count,
            "mechanism": "Gaussian (rounded to the fixed-point grid), added once by the server",
            "accountant": "exact mu-GDP (privfed.dp.PrivacyLedger)",
            "ledger_sha256": hashlib.sha256(ledger_text.encode()).hexdigest(),
            "noise_model": "central (server adds noise once after unmasking)",
            "trust": "trusted server: it sees the exact unmasked totals",
        }
        if self.distributed is not None:
            # The distributed release is accounted in RDP; the Gaussian mu of the same
            # noise stds is kept under its own name (it is not this mechanism's claim).
            dp.update(
                {
                    "mu": None,
                    "gaussian_equivalent_mu": self.mu,
                    "mechanism": (
                        f"distributed {self.distributed['mechanism']} (exact integer noise "
                        "added by every client before masking)"
                    ),
                    "accountant": "Renyi DP (privfed.dp.PrivacyLedger, distributed-blocks)",
                    "noise_model": self.distributed["noise_model"],
                    "trust": self.distributed["trust"],
                    "distributed": self.distributed,
                }
            )
        if self.noisy_class_counts is not None:
            dp["noisy_class_counts"] = list(self.noisy_class_counts)
        return release_document(
            "latent",
            public={
                "config": self.config,
                "latent_dim": self.latent_dim,
                "clip_norm": self.clip_norm,
                "fractional_bits": self.fractional_bits,
                "payload_values_per_class": self.payload_values_per_class,
                "payload_values_per_client": self.payload_values_per_client,
                "payload_bytes_per_client": self.payload_bytes_per_client,
                "num_clients": self.num_clients,
                "secagg_threshold": self.secagg_threshold,
                "secagg_mode": self.config.get("secagg_mode", "semi-honest"),
                "dropped_clients": self.dropped_clients,
                "num_threads_used": self.num_threads_used,
            },
            dp=dp,
            samples_per_class=self.config["samples_per_class"],
        )

    def ledger_explanation(self) -> dict[str, Any]:
        """What ``ledger.json``'s numbers mean and how they map to ``release.json``.

        Central noise: every entry is one class's joint release in whitened
        form.  Dividing each block of the class's statistics by its noise std
        (the sum's ``d`` values by ``dp.noise_std_sum``, the ``d²`` entries of
        the second moment by ``dp.noise_std_second_moment`` and, when counts
        are noised, the count by ``dp.noise_std_count``) gives one vector of
        ``d + d²`` (+1) values with noise std 1, whose exact L2 sensitivity is
        the joint μ (:func:`privfed.dp.joint_mu_squared`): ``l2_sensitivity``
        is ``dp.mu`` and the ratio ``l2_sensitivity / noise_std`` is the
        entry's μ-GDP.
        """
        d = self.latent_dim
        counted = self.noise_std_count > 0
        dimension = d + d * d + (1 if counted else 0)
        adjacency = str(self.config.get("adjacency"))
        if self.distributed is not None:
            return {
                "form": "distributed integer noise blocks",
                "summary": (
                    "One entry per class: the clients' integer noise on the class's "
                    f"{dimension} fixed-point values (sum, second moment"
                    + (", count" if counted else "")
                    + "), accounted in Renyi DP from the noise each honest client adds "
                    "('unit_mu_squared' is the whitened sensitivity of that noise). "
                    "release.json's dp.gaussian_equivalent_mu is the Gaussian mu of the same "
                    "stds, not this mechanism's claim."
                ),
            }
        from privfed.dp.sensitivity import Adjacency, sum_sensitivity

        sum_delta = sum_sensitivity(self.clip_norm, Adjacency(adjacency))
        blocks: dict[str, Any] = {
            "sum": {
                "values": d,
                "noise_std": self.noise_std_sum,
                "release_field": "dp.noise_std_sum",
            },
            "second_moment": {
                "values": d * d,
                "noise_std": self.noise_std_second_moment,
                "release_field": "dp.noise_std_second_moment",
            },
        }
        if counted:
            blocks["count"] = {
                "values": 1,
                "noise_std": self.noise_std_count,
                "release_field": "dp.noise_std_count",
            }
        labels_private = bool(self.config.get("adjacency") == "replace-one" and counted)
        return {
            "form": "whitened",
            "summary": (
                "Each entry is one class's joint release (latent sum, second moment"
                + (", count" if counted else "")
                + ") in whitened form: every block divided by its own noise std from "
                "release.json, giving one vector of dimension d + d*d"
                + (" + 1" if counted else "")
                + f" = {dimension} (d = {d}) with noise_std 1.0. Its l2_sensitivity is "
                "the exact joint sensitivity of that whitened vector under "
                f"{adjacency} (privfed.dp.joint_mu_squared of public.clip_norm and the "
                "stds), which equals release.json's dp.mu; l2_sensitivity / noise_std is "
                "the entry's mu-GDP. In latent units the sum's sensitivity is "
                f"{sum_delta:.6g} (clip norm {self.clip_norm:.6g}) against noise std "
                f"{self.noise_std_sum:.6g}."
            ),
            "partition": (
                "one entry on all records (labels are private: a replaced record may change class)"
                if labels_private
                else "one entry per class (scheme 'class'); classes are disjoint, so they "
                "compose in parallel"
            ),
            "dimension": dimension,
            "noise_std": 1.0,
            "l2_sensitivity": self.mu,
            "release_mu_field": "dp.mu",
            "blocks": blocks,
        }

    def evaluation_dict(self) -> dict[str, Any]:
        """``evaluation.json``: what the run computed from private data without noise."""
        counted = field_dict(
            self,
            "accuracy_synthetic",
            "accuracy_real",
            "accuracy_nondp_synthetic",
            "records_public",
            "records_private",
            "records_aggregated",
            "records_test",
            "empty_clients",
            "secagg_bytes_per_client",
        )
        return evaluation_document(
            "latent",
            {
                **counted,
                "accuracy_synthetic_repeats": self.accuracy_repeats,
                "seconds": dict(self.seconds),
                "audit": None if self.audit is None else self.audit.to_dict(),
            },
        )


@dataclass(frozen=True, eq=False)
class PipelineResult(WritesArtifacts):
    """A run's report plus the artefacts later stages (plots, audits) need.

    ``synthetic_latents`` are the sampled latents behind ``synthetic_images``
    (float64 ``(s, d)``); ``audit`` is the full audit (with per-record scores)
    and ``audit_inputs`` what ``audit_inputs.npz`` holds; both ``None`` when
    the audit was off or skipped.
    """

    report: PipelineReport
    ledger: PrivacyLedger
    split: DatasetSplit
    client_indices: tuple[np.ndarray, ...]
    codec: Codec
    aggregate: LatentStatistics | None = field(repr=False)
    release: NoisyLatentStatistics = field(repr=False)
    gaussians: ClassGaussians = field(repr=False)
    synthetic_images: np.ndarray = field(repr=False)
    synthetic_labels: np.ndarray = field(repr=False)
    synthetic_latents: np.ndarray = field(repr=False)
    audit: Any = field(default=None, repr=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False)

    def artifacts(self, *, release_only: bool = False) -> RunArtifacts:
        """The run's artefacts, for :func:`privfed.engines.job.write_artifacts`.

        Args:
            release_only: Only the release (what a deployment ships): no
                ``evaluation.json`` and no ``audit_inputs.npz``.
        """
        return RunArtifacts(
            release=self.report.release_dict(),
            evaluation=None if release_only else self.report.evaluation_dict(),
            ledger=self.ledger,
            sample_images=self.synthetic_images,
            sample_labels=self.synthetic_labels,
            audit_inputs=None if release_only else self.audit_inputs,
            provenance=self.report.provenance,
            ledger_explanation=self.report.ledger_explanation(),
        )
