from replay.fixtures import replay, replay_factory  # noqa: F401  (pytest fixtures)
