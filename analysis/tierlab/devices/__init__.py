"""Device models: their profiles, profiles fitted to measurements, the cost model that re-costs a trace on them.

Imports: errors, checkout, files, catalog, metrics, traces."""
