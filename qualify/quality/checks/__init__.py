"""The quality stage's probes, one module per kind of answer (imported by
`qualify.quality.gates`)."""
