"""scripts/train.py and play.py: configs with overrides, logs, resume, export, and one-line errors on bad input."""

from __future__ import annotations

import math
import os

import onnxruntime
import pytest
import torch
import yaml

from ..script_modules import load_script
from ..validation.policies import ZeroPolicy, save_torchscript
from .cli_errors import assert_one_line_failure, one_line_error, run_script

TASK = "DiffLoco-Velocity-Flat-AnymalD"


def test_cli_errors_are_clear(capsys, tmp_path):
    train = load_script("train")
    for argv, match in ((["--task", "DiffLoco-Nope"], "unknown task"),
                        (["--task", TASK, "env.sim.contact.kapa=3"], "unknown config key"),
                        (["--task", TASK, "agent.max_iterations=ten"], "expected an integer"),
                        (["--task", TASK, "env.gait=canter"], "unknown gait 'canter'"),
                        (["--task", TASK, "env.gait.duty=1.5"], "env.gait.duty must be in (0, 1)"),
                        (["--task", TASK, "--algo", "ppo",
                          "env.randomization.after_curriculum.adversarial_fraction=0.3"],
                         "only a learner that backpropagates")):
        with pytest.raises(SystemExit):
            train.main([*argv, "--log_root", str(tmp_path)])
        assert match in capsys.readouterr().err


@pytest.mark.parametrize("algo", ["shac", "ppo"])
def test_train_resume_play_export(tmp_path, algo):
    train, play = load_script("train"), load_script("play")
    common = ["--task", TASK, "--algo", algo, "--num_envs", "8", "--log_root", str(tmp_path),
              "agent.num_steps_per_env=4", "agent.save_interval=1"]
    run = train.main([*common, "--max_iterations", "2", "--run_name", "first"])
    params = yaml.safe_load(open(os.path.join(run, "params", "env.yaml")))
    assert params["num_envs"] == 8 and params["sim"]["substeps"] == 4
    assert yaml.safe_load(open(os.path.join(run, "params", "agent.yaml")))["num_steps_per_env"] == 4
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(run))
    resumed = train.main([*common, "--max_iterations", "1", "--resume", "--load_run", ".*first", "--run_name",
                          "second"])
    checkpoints = sorted(f for f in os.listdir(resumed) if f.startswith("model_"))
    assert checkpoints, "the resumed run saved no checkpoint"
    loaded = torch.load(os.path.join(resumed, checkpoints[-1]), weights_only=False)
    # continued from the first run: SHAC counts completed iterations (2 + 1); rsl_rl's PPO stores the index of the
    # last iteration and re-runs that index on resume (its own convention, as in Isaac Lab)
    assert loaded["iter"] == {"shac": 3, "ppo": 1}[algo]
    result = play.main(["--task", TASK, "--algo", algo, "--num_envs", "4", "--log_root", str(tmp_path), "--load_run",
                        ".*second", "--checkpoint", "latest", "--steps", "5"])
    exported = result["export_dir"]
    jit = torch.jit.load(os.path.join(exported, "policy.pt"))
    obs = torch.randn(3, 48)
    assert jit(obs).shape == (3, 12)
    session = onnxruntime.InferenceSession(os.path.join(exported, "policy.onnx"))
    assert session.get_inputs()[0].shape[1] == 48
    assert session.run(None, {session.get_inputs()[0].name: obs.numpy()})[0].shape == (3, 12)
    assert result["export_errors"]["jit"] < 1e-5 and result["export_errors"]["onnx"] < 1e-4


def test_a_seed_gives_the_same_run(tmp_path):
    """``--seed`` seeds the network initialisation and the exploration noise (Isaac Lab's train scripts seed torch
    with the agent's seed): two runs of one seed end with the same weights, another seed with others."""
    train = load_script("train")

    def actor(seed, name):
        run = train.main(["--task", TASK, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
                          "agent.num_steps_per_env=3", "--max_iterations", "2", "--seed", seed, "--run_name", name])
        return torch.load(os.path.join(run, "model_2.pt"), weights_only=False)["actor_state_dict"]

    torch.manual_seed(123)  # whatever the global generator held before
    a = actor("5", "a")
    torch.manual_seed(456)
    b, c = actor("5", "b"), actor("6", "c")
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)
    assert any(not torch.equal(a[key], c[key]) for key in a)


def test_play_reports_the_forward_speed_of_a_task_without_commands(tmp_path, capsys):
    """DiffLoco-Quadruped-Forward has no velocity commands: play prints its metrics (forward speed, m/s, the base's
    world-x velocity averaged over every env step) and how the episodes ended."""
    train, play = load_script("train"), load_script("play")
    task = "DiffLoco-Quadruped-Forward"
    train.main(["--task", task, "--algo", "shac", "--num_envs", "4", "--log_root", str(tmp_path),
                "agent.num_steps_per_env=4", "--max_iterations", "1", "--run_name", "q"])
    capsys.readouterr()
    result = play.main(["--task", task, "--algo", "shac", "--num_envs", "3", "--log_root", str(tmp_path),
                        "--load_run", ".*q", "--checkpoint", "latest", "--steps", "6", "--no_export"])
    out = capsys.readouterr().out
    assert "forward_speed" in out and "by termination" in out
    metrics = result["metrics"]
    assert set(metrics) >= {"forward_speed", "speed_error", "terminations", "time_outs"}
    assert math.isfinite(metrics["forward_speed"]) and -5.0 < metrics["forward_speed"] < 5.0
    # speed_error = |v_x - 1 m/s| per step: its mean is at least |mean(v_x) - 1| (Jensen), so the two are consistent
    assert metrics["speed_error"] >= abs(metrics["forward_speed"] - 1.0) - 1e-6  # float32 means
    assert metrics["time_outs"] == 0  # 6 policy steps of 10 s episodes


def test_play_bad_input_is_a_one_line_error(tmp_path, capsys):
    """A corrupt file, a checkpoint of something else, an exported policy, a missing checkpoint, a non-positive
    count and a device this machine lacks: one line naming the problem, a non-zero exit, no traceback."""
    play = load_script("play").main
    common = ["--task", TASK, "--num_envs", "2", "--no_export", "--steps", "2", "--log_root", str(tmp_path)]
    corrupt = tmp_path / "model_3.pt"
    corrupt.write_bytes(b"not a checkpoint at all")
    message = one_line_error(capsys, play, [*common, "--checkpoint", str(corrupt)])
    assert message.startswith("error: checkpoint") and "model_3.pt" in message and "does not load" in message
    foreign = tmp_path / "model_4.pt"
    torch.save({"model_state_dict": {"w": torch.zeros(3)}, "iter": 4}, foreign)
    assert "does not load into the shac runner" in one_line_error(capsys, play, [*common, "--checkpoint", str(foreign)])
    exported = save_torchscript(ZeroPolicy(), tmp_path / "policy.pt")
    assert "exported TorchScript policy" in one_line_error(capsys, play, [*common, "--checkpoint", exported])
    assert "No log directory" in one_line_error(capsys, play, [*common, "--checkpoint", "model_9.pt"])
    for flag, value in (("--num_envs", "0"), ("--steps", "-5"), ("--video_length", "0")):
        assert f"{flag}: expected a positive integer" in one_line_error(capsys, play, [*common, flag, value])
    if not torch.cuda.is_available():
        assert "no CUDA GPU" in one_line_error(capsys, play, [*common, "--device", "cuda"])


def test_play_with_a_corrupt_checkpoint_fails_without_a_traceback(tmp_path):
    corrupt = tmp_path / "model_1.pt"
    corrupt.write_bytes(b"\x00" * 64)
    proc = run_script("play", "--task", TASK, "--num_envs", "2", "--no_export", "--checkpoint", str(corrupt))
    assert_one_line_failure(proc, 1, "does not load")


def test_train_bad_input_is_a_one_line_error(tmp_path):
    """A GPU this machine lacks, a negative env count, an unknown task, and resuming from a corrupt or a foreign
    file: one line naming the problem, no traceback, and no run folder left behind."""
    import torch

    from .cli_errors import assert_one_line_failure, run_script

    task = ["--task", "DiffLoco-Velocity-Flat-AnymalD", "--log_root", str(tmp_path / "logs")]
    if not torch.cuda.is_available():
        assert_one_line_failure(run_script("train", *task, "--device", "cuda"), 2, "no CUDA GPU")
    assert_one_line_failure(run_script("train", *task, "--num_envs", "-3"), 2, "positive integer")
    assert_one_line_failure(run_script("train", "--task", "Nope"), 2, "unknown task 'Nope'")
    corrupt = tmp_path / "model_5.pt"
    corrupt.write_bytes(b"not a checkpoint")
    assert_one_line_failure(run_script("train", *task, "--resume", "--checkpoint", str(corrupt)), 1, "not a readable")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    assert_one_line_failure(run_script("train", *task, "--resume", "--checkpoint", str(foreign)), 1, "not an rsl_rl")
    assert not (tmp_path / "logs").exists()
