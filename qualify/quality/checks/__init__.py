"""The quality stage's probes, one module per kind of answer: the package is quality's
`check_modules` in `qualify/registry.py`, so every module in it is imported and registers itself."""
