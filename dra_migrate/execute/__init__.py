"""Executing a plan against a live cluster: journaled, locked, resumable, reversible."""
