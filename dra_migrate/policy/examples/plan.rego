# Example change-review policies on a dra-migrate plan (docs/policy.md). The input is the plan as
# `dra-migrate show PLAN -o json` prints it; thresholds and the production pools are in data.json here
# (data.dramigrate_settings; each has a default).
# Run: dra-migrate policy check PLAN --policy DIR   (or: opa eval -d DIR -i plan.json data.dramigrate.deny)
package dramigrate

import rego.v1

default user_settings := {}

user_settings := data.dramigrate_settings

settings := object.union({"max_wave_percent": 10, "production_pools": [], "production_soak": "30m"}, user_settings)

pool_stages := [s | some s in input.stages; s.pool]

pool_size[pool] := n if {
	some p in input.review.inventory.pools
	pool := p.name
	n := p.nodes
}

# 1. No plan with a blocker: a blocker means something would break; fix it and plan again.
deny contains msg if {
	some f in input.findings
	f.severity == "blocker"
	msg := sprintf("blocker %s: %s", [f.id, f.message])
}

# 2. No wave larger than max_wave_percent of its pool (one node is always allowed: it is the smallest wave).
deny contains msg if {
	some s in pool_stages
	some w in s.waves
	size := count(w.nodes)
	size > 1
	total := pool_size[s.pool]
	size * 100 > settings.max_wave_percent * total
	msg := sprintf(
		"%s/%s drains %d of pool %s's %d nodes at once (more than %d%%)",
		[s.name, w.name, size, s.pool, total, settings.max_wave_percent],
	)
}

# 3. Production pools soak at least production_soak between waves (the last wave has no soak after it).
deny contains msg if {
	some s in pool_stages
	s.pool in settings.production_pools
	some i, w in s.waves
	i < count(s.waves) - 1
	time.parse_duration_ns(w.soakAfter) < time.parse_duration_ns(settings.production_soak)
	msg := sprintf(
		"%s/%s soaks %s on production pool %s (at least %s)",
		[s.name, w.name, w.soakAfter, s.pool, settings.production_soak],
	)
}

# 4. GPU quotas keep limiting: a plan that migrates pools must add the DRA quota limits before any pool stage
#    for every quota the checks found (quota-continuity info without a GitOps owner).
deny contains msg if {
	some f in input.findings
	f.id == "quota-continuity"
	f.severity == "info"
	not contains(f.remediation, "owning repository")
	some o in f.objects
	count(pool_stages) > 0
	not quota_step(o.namespace, o.name)
	msg := sprintf("ResourceQuota %s/%s gets no DRA limit before the first wave", [o.namespace, o.name])
}

quota_step(ns, name) if {
	some s in input.stages
	s.name == "prepare"
	some step in s.steps
	step.action == "set-quota"
	step.params.namespace == ns
	step.params.name == name
}

# Warnings are printed but do not fail the check.
warn contains msg if {
	some f in input.findings
	f.severity == "warning"
	msg := sprintf("warning %s: %s", [f.id, f.message])
}
