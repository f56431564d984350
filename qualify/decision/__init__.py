"""The decision, on top of the stages: one record derived from evidence under the house
policy, the document, the signature, verify.

`conclude.conclude(run, setup, key)` is what `qualify run` calls after the stages;
`derive.derive` is the one record builder (conclude, `render` and `verify` all use it);
`verify.verify` checks a signed decision and derives it again. What it presents with is
`qualify.present`, what it is trusted on (the house, judging again) `qualify.trust`.
"""
