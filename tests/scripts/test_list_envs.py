"""scripts/list_envs.py: every registered task, with its learners."""

from __future__ import annotations

from diffloco_ext.tasks import TASKS

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_list_envs_prints_every_task(capsys):
    assert load_script("list_envs").main([]) == list(TASKS)
    out = capsys.readouterr().out
    assert all(task_id in out for task_id in TASKS)


def test_an_unknown_argument_is_a_one_line_error(capsys):
    assert "unrecognized arguments: --task" in one_line_error(capsys, load_script("list_envs").main, ["--task", "x"])
