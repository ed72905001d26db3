"""End-to-end jobs shared by the Python API and the ``privfed`` command line."""

from privfed.pipeline.audit import (
    AUDIT_INPUT_ARRAYS,
    AUDIT_INPUTS_FILENAME,
    audit_skip_reason,
    audit_summary,
    save_audit_inputs,
)
from privfed.pipeline.latent import (
    PipelineConfig,
    PipelineReport,
    PipelineResult,
    ProgressFn,
    run_pipeline,
)

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
