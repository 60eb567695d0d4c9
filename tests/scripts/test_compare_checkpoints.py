"""``scripts/tools/compare_checkpoints.py``: identical checkpoints compare equal entry by entry; one changed bit in a
tensor, or an entry only one file has, is reported."""

from __future__ import annotations

import torch

from ..script_modules import load_script


def test_compare_checkpoints_finds_a_changed_bit_and_extra_entries(tmp_path, capsys):
    tool = load_script("tools/compare_checkpoints")
    a = {"actor_state_dict": {"w": torch.arange(6.0).reshape(2, 3)}, "iter": 50, "env_state": {"q": torch.ones(3)}}
    b = {"actor_state_dict": {"w": torch.arange(6.0).reshape(2, 3)}, "iter": 50, "env_state": {"q": torch.ones(3)},
         "extra": 1}
    torch.save(a, tmp_path / "a.pt")
    torch.save(b, tmp_path / "b.pt")
    assert tool.main([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]) == 0
    assert "identical entries: 3; different: 0; only in the first: 0; only in the second: 1" in capsys.readouterr().out
    b["actor_state_dict"]["w"] = b["actor_state_dict"]["w"].clone()
    b["actor_state_dict"]["w"].view(-1)[4] = torch.nextafter(torch.tensor(4.0), torch.tensor(5.0))  # one ulp
    torch.save(b, tmp_path / "b.pt")
    assert tool.main([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]) == 1
    assert "different: actor_state_dict.w" in capsys.readouterr().out
