"""What the coordinators whose state is a compacted internal topic share (the group
coordinator on ``__consumer_offsets``, the transaction coordinator on
``__transaction_state``): ``sharded.ShardedCoordinator``, the IO shell around their pure
shards, and ``keys.partition_for``.  Nothing is imported here, so the pure models can use
``keys`` without loading the shell."""
