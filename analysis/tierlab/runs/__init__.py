"""One run: its settings validated, its results directory read, analyzed and described by its manifest.

Imports: errors, checkout, catalog, metrics, traces, devices."""
