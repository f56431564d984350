"""The bounded quality suite: agent-shaped tasks, three attempts each, deterministic checks.

Tasks are data (`gates/quality/*.yaml`); `checks` holds the probes that ask and judge them,
`sandbox` runs model-written Python, `report` turns gate results into the decision's figures.
"""
