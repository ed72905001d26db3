"""privfed.secagg.protocol (under construction)."""
