"""The ``sigmap bench`` throughput programs; each prints one JSON line last."""
