"""connectors package of spark-log."""
