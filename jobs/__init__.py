"""jobs package of spark-log."""
