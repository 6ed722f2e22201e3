"""Launchers that start spark-log nodes: ``local`` (the embedded dev cluster)."""
