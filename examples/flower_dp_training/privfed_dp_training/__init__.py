"""privfed_dp_training: Flower's fl-dp-sa example (central DP + secure aggregation) with privfed."""
