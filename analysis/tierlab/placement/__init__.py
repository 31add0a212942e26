"""Where objects belong: layouts and caches recommended and validated, planner costs per tablespace.

Imports: errors, checkout, files, catalog, metrics, traces, devices, runs."""
