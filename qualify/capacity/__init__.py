"""Capacity: the prompt × concurrency matrix, per-kind decode, engine capacity, incumbent."""
