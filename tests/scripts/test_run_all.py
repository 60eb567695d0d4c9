"""scripts/experiments/run_all.py: the experiments' smoke mode runs, measures into files, and the tables come back
from the files alone; the full budgets are the documented ones."""

from __future__ import annotations

import json

from ..script_modules import load_script


def test_run_all_quick_trains_measures_and_reports_from_the_files(tmp_path):
    run_all = load_script("experiments/run_all")
    root, docs = tmp_path / "exp", tmp_path / "docs"
    assert run_all.main(["--quick", "--only", "shac_vs_ppo", "kappa_sweep", "horizon_sweep",
                         "contact_models_quadruped", "--root", str(root),
                         "--report_dir", str(docs), "--jobs", "1"]) == 0
    rep = json.loads((docs / "data" / "shac_vs_ppo.json").read_text())
    assert {r["group"] for r in rep["runs"].values()} == {"SHAC", "PPO"}
    assert all(r["finished"] and r["samples"] > 0 for r in rep["runs"].values())
    assert set(rep["backends"]["hard"]["reach"]) == {"SHAC", "PPO"} and "ratio_samples" in rep["backends"]["hard"]
    assert (docs / "figures" / "shac_vs_ppo.png").is_file()
    kappa = json.loads((docs / "data" / "kappa_sweep.json").read_text())
    assert set(kappa["backends"]) == {"hard", "mujoco"}  # MuJoCo measures the last checkpoint only
    assert [len(list((root / "kappa_sweep" / "measurements" / b).glob("*/model_*.json"))) for b in ("hard", "mujoco")] \
        == [4, 2]  # two kappas: checkpoints 1 and 2 in hard contact, the last in MuJoCo
    norms = json.loads((docs / "data" / "horizon_sweep.json").read_text())["extra"]  # the actor's gradient norms
    assert set(norms) == {"anymald-h4-s42", "anymald-h8-s42"} and all(e["mean"] > 0 for e in norms.values())
    assert (docs / "figures" / "horizon_sweep_gradients.png").is_file()
    quadruped = json.loads((docs / "data" / "contact_models_quadruped.json").read_text())  # in the task's own env
    last = quadruped["backends"]["task-mujoco"]["last"]
    assert len(last) == 3 and all({"return", "forward_speed", "fall_rate"} <= set(r) for r in last.values())
    # the tables again from the files, without training or measuring
    (docs / "data" / "shac_vs_ppo.json").unlink()
    assert run_all.main(["--only", "shac_vs_ppo", "--quick", "--root", str(root), "--report_dir", str(docs),
                         "--report_only"]) == 0
    assert json.loads((docs / "data" / "shac_vs_ppo.json").read_text())["backends"] == rep["backends"]


def test_full_budgets_are_the_protocols():
    run_all = load_script("experiments/run_all")
    runs = run_all.EXPERIMENTS["shac_vs_ppo"].runs()
    assert [(r.group, r.seed) for r in runs] == [(g, s) for g in ("SHAC", "PPO") for s in (42, 7, 1)]
    shac, ppo = runs[0], runs[3]
    assert (shac.ranks, shac.max_iterations, shac.max_minutes) == (2, 1000, 16.5)
    assert (ppo.algo, ppo.ranks, ppo.num_envs, ppo.max_minutes) == ("ppo", 2, 512, 45.0)
    horizons = run_all.EXPERIMENTS["horizon_sweep"].runs()
    assert {r.max_iterations * 2 * 128 * int(r.overrides[0].split("=")[1]) for r in horizons} == {8_192_000}
    assert len(run_all.EXPERIMENTS["contact_models"].runs()) == 9 and len(run_all.EXPERIMENTS["aligned"].runs()) == 9
