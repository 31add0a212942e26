"""One run: its settings validated, its results directory read, analyzed and described by its manifest.

Imports: errors, checkout, files, catalog, metrics, traces, devices."""
