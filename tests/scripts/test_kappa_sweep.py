"""scripts/experiments/kappa_sweep.py in its small mode (one kappa against hard contact, seconds)."""

from __future__ import annotations

from ..script_modules import load_script
from .cli_errors import one_line_error


def test_one_kappa_against_hard_contact(capsys):
    rows = load_script("experiments/kappa_sweep").main(["--kappas", "1000"])
    smoothed, hard = rows
    assert smoothed["kappa"] == 1000 and hard["kappa"] is None
    # the sigmoid lets the feet sink further than hard contact does, and gives a gradient 1.5 cm above the ground
    # where hard contact gives none
    assert smoothed["penetration"] > hard["penetration"] > 0.0
    assert 0.0 < smoothed["max_height_difference"] < 0.05
    assert smoothed["reaction_gradient"] > 0.0 and hard["reaction_gradient"] == 0.0
    out = capsys.readouterr().out
    assert "| 1000 |" in out and "| hard | 0 |" in out


def test_a_kappa_of_zero_is_a_one_line_error(capsys):
    assert "--kappas must be > 0" in one_line_error(capsys, load_script("experiments/kappa_sweep").main,
                                                    ["--kappas", "0"])
