"""Dynamic partitions: one per model (slugged HF id), one per corpus shard (its content-
addressed key), one per benchmark, one per model scored from its lm-eval logs (the name of its
lm-eval output folder); and the two-dimensional models × shards grid of the NLL cells."""

from __future__ import annotations

import dagster as dg

models_partitions = dg.DynamicPartitionsDefinition(name="models")
shards_partitions = dg.DynamicPartitionsDefinition(name="shards")
benchmarks_partitions = dg.DynamicPartitionsDefinition(name="benchmarks")
scored_models_partitions = dg.DynamicPartitionsDefinition(name="scored_models")

#: ``token_nll``'s cells. Two distinct definitions (MultiToSingleDimensionPartitionMapping
#: ignores the dimension name when both share one); keys read ``"<model>|<shard>"``.
cells_partitions = dg.MultiPartitionsDefinition(
    {"model": models_partitions, "shard": shards_partitions}
)
BY_SHARD = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="shard")
BY_MODEL = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="model")


def cell_key(model: str, shard: str) -> dg.MultiPartitionKey:
    """The ``token_nll`` partition of one model on one shard."""
    return dg.MultiPartitionKey({"model": model, "shard": shard})
