"""The metrics as pure functions of request frames: patterns, attribution to objects, contract, plans, throughput.

Imports: errors, checkout, files, catalog."""
