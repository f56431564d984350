"""The decision: policy over every verdict, one record, the document, the signature, verify.

`conclude.conclude(run, key)` is what `qualify run` calls after the stages; `render.render_run`
re-renders a decision from evidence alone; `verify.verify` checks a signed decision against the
files on disk. Import from the modules: this package's `settings` is read by the candidate model,
so importing the rest here would be circular.
"""
