"""privfed's soak harness app (see scripts/soak.py)."""
