"""privfed.testing (under construction)."""
