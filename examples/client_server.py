"""Clients and a server exchanging serialized secure-aggregation messages.

Two clients (the smallest round with a threshold of 2) each hold a shard of the
private digits split.  Each computes its exact per-class latent statistics and
takes part in one double-masking secure-aggregation round; every message goes
through ``to_bytes()`` / ``from_bytes()`` as it would over any transport, and
its size is printed.  The server learns only the total, which it publishes
as a differentially private release.

    python examples/client_server.py
"""

from __future__ import annotations

import numpy as np
import torch

from privfed.data import load_digits, partition, split_public_private
from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.codecs import PCACodec
from privfed.engines.latent import (
    LatentStatistics,
    LatentStatisticsConfig,
    compute_latent_statistics,
    fit_class_gaussians,
    release_latent_statistics,
)
from privfed.engines.moments.planning import plan_latent_release
from privfed.secagg import (
    Roster,
    RoutedShares,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    UnmaskRequest,
    decode_message,
    new_session_id,
)

# --- public setup: everybody agrees on the codec and the statistics config -----------
split = split_public_private(load_digits(), public_fraction=0.15, test_fraction=0.25, seed=0)
codec = PCACodec.fit(torch.from_numpy(np.array(split.public.images)), latent_dim=8)
stats_config = LatentStatisticsConfig(
    dim=codec.latent_dim, num_classes=10, clip_norm=codec.default_clip_norm, max_records=10_000
)
shards = partition(split.private.labels, scheme="dirichlet", num_clients=2, seed=0, alpha=0.5)

# --- each client: encode, exact statistics, ring vector ------------------------------
vectors = []
for shard in shards:
    latents = codec.encode(torch.from_numpy(np.array(split.private.images[shard])))
    stats = compute_latent_statistics(
        latents,
        split.private.labels[shard],
        num_classes=10,
        clip_norm=stats_config.clip_norm,
        config=stats_config,
    )
    vectors.append(stats.to_ring_vector())
print(f"payload: {stats_config.num_values} ring values = {stats_config.payload_bytes} bytes")

# --- one secure-aggregation round, message by message --------------------------------
config = SecAggConfig(
    client_ids=(1, 2),
    threshold=2,
    vector_length=stats_config.num_values,
    session_id=new_session_id(),
)
clients = {cid: SecAggClient(config, cid) for cid in config.client_ids}
server = SecAggServer(config)

for cid, client in clients.items():
    wire = client.advertise_keys().to_bytes()
    print(f"client {cid} -> server  AdvertiseKeys   {len(wire):>8} B")
    server.receive(decode_message(wire), sender=cid)
roster = server.roster().to_bytes()
print(f"server -> clients Roster          {len(roster):>8} B")

for cid, client in clients.items():
    for message in client.share_keys(Roster.from_bytes(roster)).values():
        wire = message.to_bytes()
        print(f"client {cid} -> server  EncryptedShares {len(wire):>8} B")
        server.receive(decode_message(wire), sender=cid)
routed = {cid: m.to_bytes() for cid, m in server.routed_shares().items()}

for cid, client in clients.items():
    print(f"server -> client {cid}  RoutedShares    {len(routed[cid]):>8} B")
    wire = client.masked_input(RoutedShares.from_bytes(routed[cid]), vectors[cid - 1]).to_bytes()
    print(f"client {cid} -> server  MaskedInput     {len(wire):>8} B")
    server.receive(decode_message(wire), sender=cid)
requests = {cid: m.to_bytes() for cid, m in server.unmask_requests().items()}

for cid, client in clients.items():
    wire = client.unmask(UnmaskRequest.from_bytes(requests[cid])).to_bytes()
    print(f"client {cid} -> server  UnmaskResponse  {len(wire):>8} B")
    server.receive(decode_message(wire), sender=cid)
total = server.finalize()

# --- server: decode the exact total, release it with DP, fit Gaussians ---------------
aggregate = LatentStatistics.from_ring_vector(total, stats_config)
print(f"server learned the total of {aggregate.total_records} records, nothing per client")
plan = plan_latent_release(
    10.0,
    1e-5,
    clip_norm=stats_config.clip_norm,
    dim=stats_config.dim,
    adjacency=Adjacency.REPLACE_ONE,
)
ledger = PrivacyLedger(budget_epsilon=10.0, budget_delta=1e-5)
release = release_latent_statistics(aggregate, plan, ledger=ledger)  # CSPRNG noise
gaussians = fit_class_gaussians(release)
print(f"released at {ledger.guarantee()}")
print(f"class means shape {gaussians.means.shape}; ready to sample synthetic latents")
