"""Migration plans: the reviewed artifact that apply runs (model, building, file format, diff, drift)."""
