"""The whole latent-statistic job from Python in a few lines, with its audit.

python examples/pipeline.py
"""

import tempfile

from privfed.engines.latent import PipelineConfig, run_pipeline
from privfed.progress import format_event

config = PipelineConfig(num_clients=20, partition="dirichlet", alpha=0.1, epsilon=10.0)
result = run_pipeline(config, progress=lambda event: print(format_event(event)))
report = result.report
print(f"synthetic (DP) accuracy {report.accuracy_synthetic:.3f} at epsilon={report.epsilon}")
# The baselines (the same classifier on the real private data) run only when asked for,
# PipelineConfig(baselines=True): they do not depend on epsilon.
if report.accuracy_real is not None:
    print(f"real-data accuracy {report.accuracy_real:.3f}")
# The default membership-inference audit: one entry per attack, next to the claim.
audit = report.audit.to_dict() if report.audit else {"claimed": {}, "attacks": {}}
claimed = audit["claimed"]
for name, attack in audit["attacks"].items():
    auc = attack["auc"]
    print(
        f"{name:>18}: AUC {auc['estimate']:.3f} [{auc['lower']:.3f}, {auc['upper']:.3f}], "
        f"epsilon >= {attack['epsilon_lower_bound']:.2f} (claimed {claimed['epsilon']:g}), "
        f"mu >= {attack['mu_lower_bound']:.2f} (claimed {claimed['mu']:.2f})"
    )
# The release (release.json, ledger.json, samples.png, synthetic.npz) and the evaluation
# (evaluation.json, audit_inputs.npz for `privfed audit --run-dir`), in a fresh directory.
out = tempfile.mkdtemp(prefix="privfed-example-")
for kind, path in result.write(out).items():
    print(f"{kind:>12}: {path}")
