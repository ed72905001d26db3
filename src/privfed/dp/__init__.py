"""privfed.dp (under construction)."""
