"""privfed.models (under construction)."""
