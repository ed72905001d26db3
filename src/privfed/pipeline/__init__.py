"""End-to-end jobs shared by the Python API and the ``privfed`` command line."""

from privfed.pipeline.latent import (
    PipelineConfig,
    PipelineReport,
    PipelineResult,
    ProgressFn,
    run_pipeline,
)

__all__ = ["PipelineConfig", "PipelineReport", "PipelineResult", "ProgressFn", "run_pipeline"]
