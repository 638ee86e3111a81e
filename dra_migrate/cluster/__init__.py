"""Cluster state: where it comes from (live API or snapshot file) and the one model every command reads."""
