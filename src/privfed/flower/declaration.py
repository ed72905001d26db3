"""What a node says it added to its input: the noise declaration of a masked input.

A distributed-DP release is only as private as the noise the contributing
nodes actually added, and that noise is added on the nodes, out of the
server's sight.  A node that runs an old or a different client app (one that
masks its exact statistics) would make the server publish a release that
claims noise it does not carry.  So every node of a privfed job attaches a
:class:`NoiseDeclaration` to its masked input -- which mechanism it applied,
the digest of the public noise plan it calibrated it with, how many noise
layers it Shamir-shared and whether its noise came from a public seed -- and
the server (:class:`~privfed.flower.SecAggRound` with ``expected_input``):

* refuses a masked input whose declaration is missing, malformed, bound to
  another session or different from the one the job expects (the node is a
  dropout of that stage, as if it had sent nothing, so its input never enters
  the total);
* records the declarations of the survivors in the round's result, where the
  job checks them again before it writes a release.

Threat model: a declaration is the node's own statement, carried in the same
authenticated Flower message as its masked input (SuperNode authentication
and TLS in a deployment).  It protects against honest-but-misconfigured nodes
(an outdated app, a wrong run config, a different job), the failure this
project has met in practice; it does not and cannot prove that a malicious
node added noise -- such a node can always publish its own data, and the
release's guarantee for the *other* nodes rests on the honest contributors
its calibration assumes (``n_min = t - n_C``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from privfed.errors import MessageFormatError

__all__ = ["DECLARATION_VERSION", "NO_NOISE", "DeclaredInput", "NoiseDeclaration"]

#: Version of the declaration's wire form.
DECLARATION_VERSION: Final = 1
#: The mechanism a node declares when it adds no noise (central noise: the server adds it).
NO_NOISE: Final = "none"
# Upper bound on a declaration's size on the wire (a real one is ~250 bytes).
_MAX_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class NoiseDeclaration:
    """The noise a node added to its input before masking (public facts only).

    Attributes:
        noise_model: The job's noise model (``"central"``,
            ``"distributed-gaussian"`` or ``"distributed-skellam"``).
        mechanism: What the node applied: ``"discrete-gaussian"``,
            ``"skellam"``, or :data:`NO_NOISE`.
        plan_sha256: Hex digest of the public noise plan the node calibrated
            its noise with (``""`` when it adds none).
        layers: Noise layers the node Shamir-shared (excess removal).
        seeded: Whether the node's noise came from the run's public seed
            (reproducible experiments: whoever knows the seed knows the noise).
    """

    noise_model: str
    mechanism: str
    plan_sha256: str = ""
    layers: int = 0
    seeded: bool = False

    @classmethod
    def none(cls, noise_model: str = "central") -> NoiseDeclaration:
        """The declaration of a node that adds no noise (the server noises)."""
        return cls(noise_model=noise_model, mechanism=NO_NOISE)

    def to_dict(self) -> dict[str, Any]:
        """The declaration's fields (JSON-friendly)."""
        return dataclasses.asdict(self)

    def to_bytes(self, session_id: bytes) -> bytes:
        """Canonical wire form, bound to the round's (wire) session id."""
        doc = {"v": DECLARATION_VERSION, "session": session_id.hex(), **self.to_dict()}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple[NoiseDeclaration, bytes]:
        """Parse :meth:`to_bytes`; ``(declaration, session id)``.

        Raises:
            MessageFormatError: Not a declaration of this version.
        """
        if not isinstance(data, bytes) or len(data) > _MAX_BYTES:
            raise MessageFormatError("the noise declaration is not a short byte string")
        try:
            doc = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise MessageFormatError("the noise declaration is not JSON") from None
        version = doc.get("v") if isinstance(doc, dict) else None
        if type(version) is not int or version != DECLARATION_VERSION:
            raise MessageFormatError(f"the noise declaration is not version {DECLARATION_VERSION}")
        kinds = {
            "session": str,
            "noise_model": str,
            "mechanism": str,
            "plan_sha256": str,
            "layers": int,
            "seeded": bool,
        }
        if set(doc) != {"v", *kinds}:
            raise MessageFormatError("the noise declaration has unexpected or missing fields")
        for key, kind in kinds.items():
            value = doc[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise MessageFormatError(
                    f"the noise declaration's {key!r} is not a {kind.__name__}"
                )
        try:
            session = bytes.fromhex(doc["session"])
        except ValueError:
            raise MessageFormatError("the noise declaration's session is not hex") from None
        fields = {k: doc[k] for k in kinds if k != "session"}
        return cls(**fields), session

    def differences(self, other: NoiseDeclaration) -> list[str]:
        """Fields where ``self`` (what a node declared) differs from ``other`` (what the
        job expects), as ``"field: declared X, plan Y"``."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{key}: declared {mine[key]!r}, plan {theirs[key]!r}"
            for key in mine
            if mine[key] != theirs[key]
        ]


@dataclasses.dataclass(frozen=True)
class DeclaredInput:
    """What a ``values`` callback returns to declare the noise in its input.

    :func:`privfed.flower.add_secagg_handlers` masks ``values`` and sends
    ``declaration`` with the masked input (bound to the round's session).

    Attributes:
        values: The node's ring vector for the round (noise already added).
        declaration: What the node added.
    """

    values: npt.NDArray[np.integer]
    declaration: NoiseDeclaration
