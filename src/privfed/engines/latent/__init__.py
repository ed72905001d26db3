"""The latent-statistic engine (FedKT-CSD), one wing.

Where a change goes:

* :mod:`~privfed.engines.latent.statistics` -- the shared specification
  (:class:`LatentStatisticsConfig`: dimension, classes, clip norm, grid) and the
  exact integer value type :class:`LatentStatistics` (numpy only);
* :mod:`~privfed.engines.latent.client` -- a client's exact fixed-point
  statistics from its latents (torch);
* :mod:`~privfed.engines.latent.release` -- the server's DP release (numpy);
* :mod:`~privfed.engines.latent.accounting` -- how a release enters the ledger;
* :mod:`~privfed.engines.latent.gaussians` -- post-processing into one
  Gaussian per class (numpy);
* :mod:`~privfed.engines.latent.audit` -- the default membership-inference
  audit stage;
* :mod:`~privfed.engines.latent.job` -- the job and its stages
  (:mod:`~privfed.engines.latent.stages`), with its configuration
  (:mod:`~privfed.engines.latent.config`) and report
  (:mod:`~privfed.engines.latent.report`).

Names load lazily: the server path (statistics, release, accounting,
gaussians) never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_RECORDS": "privfed.engines.latent.statistics",
    "LatentStatistics": "privfed.engines.latent.statistics",
    "LatentStatisticsConfig": "privfed.engines.latent.statistics",
    "packed_size": "privfed.engines.latent.statistics",
    "unpack_symmetric": "privfed.engines.latent.statistics",
    "LatentStatisticsAccumulator": "privfed.engines.latent.client",
    "compute_latent_statistics": "privfed.engines.latent.client",
    "NoisePlacement": "privfed.engines.latent.release",
    "NoisyLatentStatistics": "privfed.engines.latent.release",
    "nonprivate_release": "privfed.engines.latent.release",
    "release_latent_statistics": "privfed.engines.latent.release",
    "release_with_noise_stds": "privfed.engines.latent.release",
    "ClassGaussians": "privfed.engines.latent.gaussians",
    "fit_class_gaussians": "privfed.engines.latent.gaussians",
    "project_psd": "privfed.engines.latent.gaussians",
    "AUDIT_INPUTS_FILENAME": "privfed.engines.latent.audit",
    "AUDIT_INPUT_ARRAYS": "privfed.engines.latent.audit",
    "audit_skip_reason": "privfed.engines.latent.audit",
    "audit_summary": "privfed.engines.latent.audit",
    "save_audit_inputs": "privfed.engines.latent.audit",
    "PipelineConfig": "privfed.engines.latent.config",
    "PipelineReport": "privfed.engines.latent.report",
    "PipelineResult": "privfed.engines.latent.report",
    "ProgressFn": "privfed.engines.latent.job",
    "run_pipeline": "privfed.engines.latent.job",
}

__all__ = [
    "AUDIT_INPUTS_FILENAME",
    "AUDIT_INPUT_ARRAYS",
    "DEFAULT_MAX_RECORDS",
    "ClassGaussians",
    "LatentStatistics",
    "LatentStatisticsAccumulator",
    "LatentStatisticsConfig",
    "NoisePlacement",
    "NoisyLatentStatistics",
    "PipelineConfig",
    "PipelineReport",
    "PipelineResult",
    "ProgressFn",
    "audit_skip_reason",
    "audit_summary",
    "compute_latent_statistics",
    "fit_class_gaussians",
    "nonprivate_release",
    "packed_size",
    "project_psd",
    "release_latent_statistics",
    "release_with_noise_stds",
    "run_pipeline",
    "save_audit_inputs",
    "unpack_symmetric",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - static view of the lazy names
    from privfed.engines.latent.audit import (
        AUDIT_INPUT_ARRAYS,
        AUDIT_INPUTS_FILENAME,
        audit_skip_reason,
        audit_summary,
        save_audit_inputs,
    )
    from privfed.engines.latent.client import (
        LatentStatisticsAccumulator,
        compute_latent_statistics,
    )
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.gaussians import (
        ClassGaussians,
        fit_class_gaussians,
        project_psd,
    )
    from privfed.engines.latent.job import ProgressFn, run_pipeline
    from privfed.engines.latent.release import (
        NoisePlacement,
        NoisyLatentStatistics,
        nonprivate_release,
        release_latent_statistics,
        release_with_noise_stds,
    )
    from privfed.engines.latent.report import PipelineReport, PipelineResult
    from privfed.engines.latent.statistics import (
        DEFAULT_MAX_RECORDS,
        LatentStatistics,
        LatentStatisticsConfig,
        packed_size,
        unpack_symmetric,
    )
