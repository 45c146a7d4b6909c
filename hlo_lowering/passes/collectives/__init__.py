"""Passes over the collectives of a partitioned program (docs/multi-device.md)."""
