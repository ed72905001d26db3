"""The one place privfed's version is written (``pyproject.toml`` reads it)."""

__version__ = "0.1.0.dev0"
