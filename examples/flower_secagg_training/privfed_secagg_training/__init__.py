"""privfed_secagg_training: Flower's SecAgg+ example with privfed's secure aggregation."""
