"""Dynamic partitions: one per model (slugged HF id) and one per benchmark."""

from __future__ import annotations

import dagster as dg

models_partitions = dg.DynamicPartitionsDefinition(name="models")
benchmarks_partitions = dg.DynamicPartitionsDefinition(name="benchmarks")
