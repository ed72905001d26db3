"""The whole latent-statistic job from Python in a few lines.

python examples/pipeline.py
"""

from privfed.pipeline import PipelineConfig, run_pipeline

config = PipelineConfig(num_clients=20, partition="dirichlet", alpha=0.1, epsilon=10.0)
result = run_pipeline(config, progress=lambda stage, message: print(f"{stage:>9}: {message}"))
report = result.report
print(
    f"synthetic (DP) accuracy {report.accuracy_synthetic:.3f}, "
    f"real-data accuracy {report.accuracy_real:.3f}, at epsilon={report.epsilon}"
)
result.write("privfed-run")  # report.json, ledger.json, samples.png
