"""The decision, on top of the stages: the one record (`derive`), `conclude` (what `qualify run`
calls after the stages), the document, the statement and `verify`. It presents with
`qualify.present` and is trusted on `qualify.trust`."""
