"""privfed.secagg.primitives (under construction)."""
