"""scripts/experiments/surrogate_jacobians.py in its tiny mode (4 open-loop trot states)."""

from __future__ import annotations

from ..script_modules import load_script


def test_surrogate_jacobians_tiny(tmp_path, capsys):
    """Every model's Jacobian is compared with MuJoCo's differences; the project's hard contact (the nearest model to
    MuJoCo's) agrees closely, so a comparison that measured nothing (or compared the wrong rows) would fail."""
    out = tmp_path / "jac.json"
    result = load_script("experiments/surrogate_jacobians").main(["--tiny", "--out", str(out)])
    assert out.exists() and result["states"] == 4
    assert set(result["models"]) == {"simplified", "smoothed", "hard"}
    for entry in result["models"].values():
        for value in entry.values():
            assert -1.0 <= value["cosine"] <= 1.0 and value["relative_error"] >= 0.0
    assert result["models"]["hard"]["target/stance"]["cosine"] > 0.95
    assert "cosine" in capsys.readouterr().out
