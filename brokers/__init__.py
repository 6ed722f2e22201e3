"""brokers package of spark-log."""
