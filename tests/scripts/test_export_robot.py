"""scripts/export_robot.py: the MJCF file MuJoCo loads, and a folder that cannot be written is a one-line error."""

from __future__ import annotations

import mujoco

from diffloco_ext.assets import get_robot

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_exports_a_model_mujoco_loads(tmp_path, capsys):
    path = load_script("export_robot").main(["--robot", "anymal_d", "--out", str(tmp_path)])
    model = mujoco.MjModel.from_xml_path(str(path))
    robot = get_robot("anymal_d")
    assert path == tmp_path / "anymal_d.xml" and model.nu == robot.num_joints
    assert f"wrote {path}" in capsys.readouterr().out


def test_an_unwritable_folder_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    message = one_line_error(capsys, load_script("export_robot").main, ["--out", str(blocker / "robots")])
    assert message.startswith("error: cannot write") and "a_file" in message
