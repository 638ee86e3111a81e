"""Readiness checks: one function per rule, registered; findings with stable ids (README "Checks")."""
