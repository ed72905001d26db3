"""Compatibility names for the latent-statistic job (its home is :mod:`privfed.engines.latent.job`).

``from privfed.pipeline import PipelineConfig, run_pipeline`` keeps working; the
names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privfed._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AUDIT_INPUTS_FILENAME": "privfed.engines.latent.audit",
    "AUDIT_INPUT_ARRAYS": "privfed.engines.latent.audit",
    "audit_skip_reason": "privfed.engines.latent.audit",
    "audit_summary": "privfed.engines.latent.audit",
    "save_audit_inputs": "privfed.engines.latent.audit",
    "PipelineConfig": "privfed.engines.latent.job",
    "PipelineReport": "privfed.engines.latent.job",
    "PipelineResult": "privfed.engines.latent.job",
    "ProgressFn": "privfed.engines.latent.job",
    "run_pipeline": "privfed.engines.latent.job",
}

__all__ = [
    "AUDIT_INPUTS_FILENAME",
    "AUDIT_INPUT_ARRAYS",
    "PipelineConfig",
    "PipelineReport",
    "PipelineResult",
    "ProgressFn",
    "audit_skip_reason",
    "audit_summary",
    "run_pipeline",
    "save_audit_inputs",
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
    from privfed.engines.latent.job import (
        PipelineConfig,
        PipelineReport,
        PipelineResult,
        ProgressFn,
        run_pipeline,
    )
