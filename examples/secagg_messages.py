"""Drive the secure-aggregation state machines by hand, as a transport would.

Every message leaves its sender as bytes (``to_bytes``) and is parsed by the
receiver (``decode_message`` / ``from_bytes``), which is all a transport (Flower
messages, gRPC, files in a shared folder) has to carry.  Client 4 drops out
before sending its masked input, so its input is not in the sum, and the server
removes its pairwise masks from the others' inputs.

Run with ``python examples/secagg_messages.py``.
"""

from __future__ import annotations

import numpy as np

from privfed.secagg import (
    EncryptedSharesBundle,
    Roster,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    UnmaskRequest,
    decode_message,
)
from privfed.secagg.primitives.fixedpoint import FixedPointConfig


def main() -> None:
    # Real-valued updates are quantized to ring elements first.
    codec = FixedPointConfig(fractional_bits=16, max_abs_value=10.0, max_summands=5)
    updates = {cid: np.full(3, 0.5 * cid) for cid in (1, 2, 3, 4, 5)}

    config = SecAggConfig(client_ids=(1, 2, 3, 4, 5), threshold=3, vector_length=3)
    clients = {cid: SecAggClient(config, cid) for cid in config.client_ids}
    server = SecAggServer(config)

    # Stage 1: advertise keys.
    # ``sender``: who delivered the bytes, as the transport authenticated it.
    for cid, client in clients.items():
        server.receive(decode_message(client.advertise_keys().to_bytes()), sender=cid)
    roster = server.roster().to_bytes()  # broadcast to every client
    print(f"roster: {len(roster)} bytes for {len(clients)} clients")

    # Stage 2: share keys; the server only routes ciphertexts it cannot read.  Each
    # client sends all of its ciphertexts as one bundle (one message per client).
    for cid, client in clients.items():
        outgoing = client.share_keys(Roster.from_bytes(roster))
        bundle = EncryptedSharesBundle.from_shares(outgoing).to_bytes()
        server.receive(decode_message(bundle), sender=cid)
    routed = {cid: m.to_bytes() for cid, m in server.routed_shares().items()}

    # Stage 3: masked input; the client hands its input over only now.  Client 4 is gone.
    for cid, client in clients.items():
        if cid == 4:
            continue
        ring_values = codec.encode(updates[cid])
        masked = client.masked_input(RoutedShares.from_bytes(routed[cid]), ring_values)
        server.receive(decode_message(masked.to_bytes()), sender=cid)
    requests = {cid: m.to_bytes() for cid, m in server.unmask_requests().items()}
    print(f"request for client 1: {UnmaskRequest.from_bytes(requests[1])}")

    # Stage 4: each survivor reveals one share per peer; the server unmasks.
    for cid, data in requests.items():
        response = clients[cid].unmask(UnmaskRequest.from_bytes(data))
        server.receive(decode_message(response.to_bytes()), sender=cid)
    total = server.finalize()

    decoded = codec.decode(total)
    expected = sum(updates[c] for c in (1, 2, 3, 5))
    print(f"survivors: {sorted(server.survivors)}; dropped: {sorted(server.dropped)}")
    print(f"secure sum: {decoded}  (plain sum of survivors: {expected})")


if __name__ == "__main__":
    main()
