"""The quality stage's probes, one module per kind of answer: the package is the quality spec's
`judges` (`qualify/quality/__init__.py`), so every module in it is imported and registers itself."""
