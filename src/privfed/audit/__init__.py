"""privfed.audit (under construction)."""
