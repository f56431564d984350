"""Gates: declared in `gates/<stage>/*.yaml`, run by small registered checks (`files` reads
them, `registry` holds the checks, `probe` is what a probe is handed, `runner` runs them,
`thresholds` is what the house policy lets judges compare against)."""
