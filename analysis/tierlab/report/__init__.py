"""The reports (HTML with inline plots, Markdown): the only package that plots.

Imports: errors, checkout, files, catalog, metrics, traces, devices, runs, placement, studies."""
