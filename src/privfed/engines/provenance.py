"""Provenance of a run's files: which privfed, when, which run, and what made it.

Every ``release.json``, ``evaluation.json``, ``ledger.json`` and model card of
one run carries the same ``provenance`` object (:func:`make_provenance`):

* ``privfed_version`` -- the version that wrote it;
* ``created_utc`` -- when the run finished, ISO 8601 in UTC to the second;
* ``run_id`` -- a random id, the same in every file of one run (two writes of
  one result -- a full run and its release-only export -- share it);
* ``command`` -- the command line (``["privfed", "run", ...]``) for a CLI run,
  ``None`` for a Python run, whose configuration is ``config``;
* ``config`` -- the job's configuration as data (what ``release.json`` holds
  under ``public.config``).

No secret is ever recorded: the DP noise seed is one (whoever knows it can
regenerate the noise and subtract it), so ``--noise-seed``'s value is
replaced by :data:`REDACTED` in ``command`` and a configuration keeps only
the flag ``noise_seeded`` (:func:`redact_command`, :func:`redact_config`).

Standard library only.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from privfed._version import __version__

__all__ = ["REDACTED", "SECRET_KEYS", "SECRET_OPTIONS", "make_provenance", "redact_command"]

#: What stands in for a secret's value.
REDACTED = "<redacted>"
#: Command-line options whose value is a secret (the next argument, or ``=value``).
SECRET_OPTIONS: tuple[str, ...] = ("--noise-seed",)
#: Configuration keys whose value is a secret.
SECRET_KEYS: tuple[str, ...] = ("noise_seed",)


def redact_command(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every :data:`SECRET_OPTIONS` option replaced."""
    out: list[str] = []
    hide_next = False
    for arg in (str(a) for a in argv):
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, equals, _ = arg.partition("=")
        if name in SECRET_OPTIONS:
            if equals:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` without :data:`SECRET_KEYS` (nested mappings too)."""
    return {
        str(k): redact_config(v) if isinstance(v, Mapping) else v
        for k, v in config.items()
        if k not in SECRET_KEYS
    }


def make_provenance(
    config: Mapping[str, Any] | None = None, *, command: Sequence[str] | None = None
) -> dict[str, Any]:
    """A fresh provenance object (see the module docstring).

    Args:
        config: The job's configuration as plain data (secrets are dropped).
        command: The command line, or ``None`` (a Python run; secrets are redacted).
    """
    return {
        "privfed_version": __version__,
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run_id": secrets.token_hex(8),
        "command": None if command is None else redact_command(command),
        "config": None if config is None else redact_config(config),
    }


def with_command(provenance: Mapping[str, Any], command: Sequence[str] | None) -> dict[str, Any]:
    """``provenance`` with ``command`` set (redacted); unchanged when ``command`` is ``None``."""
    out = dict(provenance)
    if command is not None:
        out["command"] = redact_command(command)
    return out
