"""Studies of many runs: a matrix of run settings run point by point, and the advice it supports.

Imports: errors, checkout, files, catalog, metrics, traces, devices, runs, placement."""
