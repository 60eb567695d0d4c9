"""scripts/tools/transcribe_assets.py: run on the public descriptions, it writes exactly the committed figures."""

from __future__ import annotations

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_the_committed_figures_are_what_the_tool_writes(shared_assets, tmp_path, monkeypatch):
    tool = load_script("tools/transcribe_assets")
    committed = tool.OUT
    monkeypatch.setattr(tool, "OUT", tmp_path)
    tool.main(["--shared", str(shared_assets)])
    written = sorted(p.name for p in tmp_path.glob("_*_figures.py"))
    assert written == ["_anymal_c_figures.py", "_anymal_d_figures.py", "_warp_quadruped_figures.py"]
    for name in written:
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name


def test_a_missing_source_folder_is_a_one_line_error(tmp_path, capsys):
    main = load_script("tools/transcribe_assets").main
    assert "--shared: no folder" in one_line_error(capsys, main, ["--shared", str(tmp_path / "nowhere")])
