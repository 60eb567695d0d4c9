"""The scripts' bad-input contract: a run that cannot start ends with one line naming the problem and a non-zero
exit status, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def one_line_error(capsys, main, argv: list[str]) -> str:
    """``main(argv)`` called in-process must exit with an error: ``SystemExit("error: ...")`` (status 1) or
    argparse's ``parser.error`` (usage, then ``<prog>: error: ...``; status 2). Returns the error line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    code = exc.value.code
    if isinstance(code, str):
        message = code
    else:
        assert code == 2, f"exit status {code}"
        message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error: " in message and "\n" not in message, message
    return message


def run_script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python scripts/<name>.py ARGS`` as a user runs it, from the repository's root."""
    return subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_failure(proc: subprocess.CompletedProcess, status: int, contains: str) -> str:
    """The process failed with ``status``, without a traceback, its last stderr line naming the problem."""
    assert proc.returncode == status, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "error: " in last and contains in last, proc.stderr[-3000:]
    return last
