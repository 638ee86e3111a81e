"""Manifest conversion: device-plugin GPU requests to ResourceClaimTemplates (`dra-migrate convert`)."""
