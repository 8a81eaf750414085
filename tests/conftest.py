"""Shared fixtures: every registered lab id, and quiet third-party loggers."""

from __future__ import annotations

import pytest

import labtwin

ALL_TASKS = labtwin.list_tasks()


@pytest.fixture(params=ALL_TASKS)
def task_id(request: pytest.FixtureRequest) -> str:
    return request.param
