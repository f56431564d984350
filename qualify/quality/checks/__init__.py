"""The quality stage's probes, one module per kind of answer (see `qualify.quality.gates`)."""
