"""Per-stage candidate settings, one module per owner; `qualify.candidate` assembles them."""
