"""The trust statement of a latent release's noise model, in words (for the release document).

What the guarantee assumes depends on who adds the noise (central server or every
client), the secure-aggregation mode, n_C, t and the noise layers;
:attr:`privfed.engines.latent.distributed.DistributedNoisePlan.trust` states it.
"""

from __future__ import annotations

__all__ = ["trust_text"]


def trust_text(
    model: str, corrupted: int, threshold: int, layers: int, secagg_mode: str = "semi-honest"
) -> str:
    """What ``model``'s guarantee assumes, in words (moved verbatim from the plan's module).

    ``model`` is the value of a :class:`~privfed.engines.latent.distributed.NoiseModel`
    (a str enum; taken as its value so this module needs nothing from the plan's).
    """
    if model == "central":
        return (
            "trusted server: it sees the exact unmasked totals and adds the noise; "
            "no DP against whoever holds the server"
        )
    text = (
        f"server not trusted with the data: every client adds noise before masking; "
        f"calibrated for n_min = t - n_C = {threshold} - {corrupted} = "
        f"{threshold - corrupted} honest contributors (at most {corrupted} clients collude "
        "with the server); the server never holds a noiseless total. "
    )
    if secagg_mode == "active":
        text += (
            "Secure aggregation runs in active mode: the server is not trusted to follow "
            "the protocol either (signed keys against the integrator's identity registry, "
            f"ConsistencyCheck, 2t > n + n_C with n_C = {corrupted}); while at most "
            f"{corrupted} clients collude with it, a deviating server can make the round "
            "abort but cannot unmask any single honest input, only the total of one survivor "
            "set signed by at least t clients"
        )
        if layers:
            text += (
                f"; {layers} secret-shared noise layers remove the dropout excess for that "
                "one signed survivor set"
            )
        return text
    text += (
        "Secure aggregation "
        "runs in semi-honest mode: the server is assumed to follow the protocol (one view "
        "per round); a server that shows different clients different dropout views can "
        "unmask one client's input, which carries that client's noise only"
    )
    if layers:
        text += (
            f"; {layers} secret-shared noise layers remove the dropout excess, which "
            "also assumes a server that reports one survivor set to every client (the "
            "ConsistencyCheck of the active mode enforces it)"
        )
    return text
