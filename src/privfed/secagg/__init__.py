"""privfed.secagg (under construction)."""
