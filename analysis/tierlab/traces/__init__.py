"""Block traces into request frames: blktrace (binary and text), ftrace (text and raw), the matcher, trace-stats.

Imports: errors, checkout, files, catalog, metrics."""
