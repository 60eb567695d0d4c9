"""scripts/experiments/policy_gradient_quality.py: the zeroth-order estimate agrees with an exact gradient (the
differentiable simulator's own, float64, small smoothing), and the aligned step's surrogates are measured."""

from __future__ import annotations

from ..script_modules import load_script


def _checkpoint(tmp_path, task, *extra):
    train = load_script("train")
    return train.main(["--task", task, "--num_envs", "2", "--max_iterations", "1", "--log_root", str(tmp_path),
                       "agent.num_steps_per_env=4", *extra]) + "/model_1.pt"


def test_zeroth_order_estimate_matches_an_exact_gradient(tmp_path):
    script = load_script("experiments/policy_gradient_quality")
    checkpoint = _checkpoint(tmp_path, "DiffLoco-Velocity-Flat-AnymalD")
    (r,) = script.main(["--task", "DiffLoco-Velocity-Flat-AnymalD", "--checkpoints", checkpoint, "--surrogates",
                        "smoothed", "--num_envs", "2", "--horizon", "3", "--warmup", "5", "--subspace", "4",
                        "--samples", "256", "--sigma", "1e-5", "--dtype", "float64"])
    # randomised smoothing of 256 pairs in 4 dimensions: a relative error of about sqrt(5 / 256) = 0.14
    assert r["surrogates"]["smoothed"]["cosine_to_zo"] > 0.97 and r["zo_half_cosine"] > 0.9


def test_aligned_surrogates_are_compared_to_the_estimate(tmp_path):
    script = load_script("experiments/policy_gradient_quality")
    checkpoint = _checkpoint(tmp_path, "DiffLoco-Velocity-Flat-AnymalD-Aligned", "env.sim.engine_threads=1")
    (r,) = script.main(["--checkpoints", checkpoint, "--tiny", "--out", str(tmp_path / "q.json")])
    assert set(r["surrogates"]) == {"smoothed", "simplified"} and (tmp_path / "q.json").is_file()
    assert all(-1.0 <= v["cosine_to_zo"] <= 1.0 and v["grad_norm"] > 0 for v in r["surrogates"].values())
    assert -1.0 <= r["surrogates_cosine"] <= 1.0
