"""Stages: each one a registered async function that returns a `StageResult`."""

from qualify.stages.base import STAGES, StageContext, finish, stage

__all__ = ["STAGES", "StageContext", "finish", "stage"]
