"""The reports (HTML with inline plots, Markdown): the only package that plots.

Imports: errors, checkout, catalog, metrics, traces, devices, runs, placement, studies."""
