"""The decision: the house policy, one record derived from evidence, the document, the
signature, verify, and the trust the alias gate runs on.

`conclude.conclude(run, setup, key)` is what `qualify run` calls after the stages;
`derive.derive` is the one record builder (conclude, `render` and `verify` all use it);
`verify.verify` checks a signed decision and derives it again; `trust` is the house repository
(policy and pinned keys at HEAD); `house` is the house policy model. Import from the modules:
this package's `settings` is read by the candidate model, so importing the rest here would be
circular.
"""
