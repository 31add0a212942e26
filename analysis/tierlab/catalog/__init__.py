"""What tierlab knows before anything runs (data, no I/O): engines, workloads, run variables, layouts, analysis parameters.

Imports: errors, checkout, files."""
