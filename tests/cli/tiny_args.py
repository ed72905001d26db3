"""The smallest `privfed run` the command-line tests share (seconds, not minutes)."""

TINY_CLI = [
    "run",
    "--clients",
    "4",
    "--samples-per-class",
    "20",
    "--epochs",
    "1",
    "--latent-dim",
    "4",
    "--partition",
    "iid",
    "--noise-seed",
    "1",
    "--no-baselines",
    "--quiet",
]
