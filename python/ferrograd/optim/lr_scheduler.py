"""Learning-rate schedulers (placeholder; the schedulers land separately)."""
