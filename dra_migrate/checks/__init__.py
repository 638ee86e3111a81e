"""Readiness checks: one function per rule, registered; findings with stable ids (docs/rules.md)."""
