"""Dynamic partitions: one per model (slugged HF id), one per benchmark, one per model
scored from its lm-eval logs (the name of its lm-eval output folder)."""

from __future__ import annotations

import dagster as dg

models_partitions = dg.DynamicPartitionsDefinition(name="models")
benchmarks_partitions = dg.DynamicPartitionsDefinition(name="benchmarks")
scored_models_partitions = dg.DynamicPartitionsDefinition(name="scored_models")
