"""The differentiable env protocol, checked on the torch toy envs."""

import pytest
import torch

from diffloco_ext.learning.env import FINAL_OBS_KEY, TIME_OUTS_KEY, DiffVecEnv, is_differentiable_env, split_dones
from diffloco_ext.learning.toy_envs import PendulumSwingUpCfg, PendulumSwingUpEnv, PointMassCfg, PointMassEnv


def _rollout_return(env, actions):
    total = 0.0
    for a in actions:
        _, r, _, _ = env.step(a)
        total = total + r.sum()
    return total


@pytest.mark.parametrize("make", [lambda: PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=3, seed=1)),
                                  lambda: PointMassEnv(PointMassCfg(num_envs=3, seed=1, dim=2))])
def test_gradient_of_return_matches_finite_differences(make):
    """d(return over 5 steps)/d(first action) from autograd equals a central finite difference (float64)."""
    torch.set_default_dtype(torch.float64)
    try:
        env = make()
        assert isinstance(env, DiffVecEnv) and is_differentiable_env(env)
        start = env.state_dict()
        g = torch.Generator().manual_seed(0)
        actions = [0.5 * torch.rand(env.num_envs, env.num_actions, generator=g) - 0.25 for _ in range(5)]
        actions[0].requires_grad_(True)
        _rollout_return(env, actions).backward()
        grad = actions[0].grad.clone()
        eps = 1e-6
        fd = torch.zeros_like(grad)
        for i in range(env.num_envs):
            for j in range(env.num_actions):
                vals = []
                for sign in (1, -1):
                    env.load_state_dict(start)
                    pert = [a.detach().clone() for a in actions]
                    pert[0][i, j] += sign * eps
                    vals.append(float(_rollout_return(env, pert)))
                fd[i, j] = (vals[0] - vals[1]) / (2 * eps)
        assert grad.abs().max() > 1e-3  # informative gradient
        torch.testing.assert_close(grad, fd, rtol=1e-5, atol=1e-7)
    finally:
        torch.set_default_dtype(torch.float32)


def test_detach_state_cuts_the_graph():
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=4))
    a = torch.zeros(4, 1, requires_grad=True)
    obs, r, _, _ = env.step(a)
    assert obs["policy"].grad_fn is not None and r.grad_fn is not None
    env.detach_state()
    assert env.get_observations()["policy"].grad_fn is None
    _, r2, _, _ = env.step(torch.zeros(4, 1))
    assert r2.grad_fn is None  # nothing of the previous horizon is reachable


def test_no_grad_and_inference_mode_steps():
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=4))
    with torch.inference_mode():
        obs, r, d, _ = env.step(torch.zeros(4, 1))
    assert not r.requires_grad and obs["policy"].shape == (4, 3) and d.shape == (4,)


def test_time_outs_final_observations_and_reset_cuts_gradient():
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=4, max_episode_length=3))
    env.episode_length_buf[:] = torch.tensor([0, 1, 2, 2])
    a = torch.full((4, 1), 0.3, requires_grad=True)
    obs, r, dones, extras = env.step(a)
    assert dones.tolist() == [0, 0, 1, 1]
    assert extras[TIME_OUTS_KEY].tolist() == [False, False, True, True]
    terminated, timed_out = split_dones(dones, extras)
    assert not terminated.any() and timed_out.tolist() == [False, False, True, True]
    final = extras[FINAL_OBS_KEY]["policy"]
    # Not-done rows: final observation = observation; done rows: pre-reset state, differs from the reset one.
    torch.testing.assert_close(final[:2], obs["policy"][:2])
    assert not torch.allclose(final[2:], obs["policy"][2:])
    assert env.episode_length_buf.tolist() == [1, 2, 0, 0]
    # Gradients: the final observation of a reset env depends on its action, the reset observation does not.
    (g_final,) = torch.autograd.grad(final[2:, 2].sum(), a, retain_graph=True)
    (g_reset,) = torch.autograd.grad(obs["policy"][:, 2].sum(), a, allow_unused=True)
    assert g_final[2:].abs().min() > 0
    assert g_reset[2:].abs().max() == 0 and g_reset[:2].abs().min() > 0


def test_point_mass_terminations_are_not_time_outs():
    env = PointMassEnv(PointMassCfg(num_envs=2, dim=2, arena_half_width=1.0, init_position=0.5, init_velocity=0.0))
    for _ in range(30):  # push env 0 out of the arena, keep env 1 still
        obs, r, dones, extras = env.step(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
        if dones[0]:
            break
    assert dones.tolist() == [1, 0]
    assert extras[TIME_OUTS_KEY].tolist() == [False, False]
    terminated, timed_out = split_dones(dones, extras)
    assert terminated.tolist() == [True, False] and not timed_out.any()
    assert extras[FINAL_OBS_KEY]["policy"][0, 0] > 1.0 >= obs["policy"][0, 0].abs()


def test_state_dict_reproduces_the_continuation():
    env = PointMassEnv(PointMassCfg(num_envs=5, dim=3, max_episode_length=4))
    for _ in range(2):
        env.step(torch.rand(5, 3) * 2 - 1)
    saved = env.state_dict()
    acts = [torch.rand(5, 3) * 2 - 1 for _ in range(6)]
    first = [env.step(a)[0]["policy"] for a in acts]
    env.load_state_dict(saved)
    second = [env.step(a)[0]["policy"] for a in acts]
    for x, y in zip(first, second):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_bad_action_shape_is_a_clear_error():
    env = PendulumSwingUpEnv(PendulumSwingUpCfg(num_envs=2))
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(3, 1))


@pytest.mark.parametrize("overrides", [[], ["env.randomization.adversarial_fraction=0.5",
                                             "env.commands.curriculum_steps=0"]])
def test_a_resumed_velocity_run_continues_exactly(tmp_path, overrides):
    """SHAC on the velocity task, 4 iterations at once against 2, a checkpoint, a fresh runner loading it and 2 more:
    the same actor and robot states to the bit. The checkpoint holds what the next iteration reads: the observation
    as drawn (its noise is not drawn again at the load), the adversary's pending step (the last backward pass's
    gradients w.r.t. the draws), the envs reset since the last cut."""
    import contextlib
    import io

    from diffloco_ext.learning import make_runner
    from diffloco_ext.tasks import registry
    from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides

    task = "DiffLoco-Velocity-Flat-AnymalD"

    def build(log_dir):
        torch.manual_seed(0)
        env_cfg = registry.load_cfg(task)
        env_cfg.num_envs = 8
        agent = registry.load_agent_cfg(task, "shac")
        agent.num_steps_per_env, agent.save_interval = 4, 2
        parsed = parse_overrides(overrides)
        apply_overrides(env_cfg, parsed["env"], "env")
        apply_overrides(agent, parsed["agent"], "agent")
        with contextlib.redirect_stdout(io.StringIO()):
            return make_runner(registry.make_env(task, env_cfg), agent, log_dir=log_dir)

    whole = build(str(tmp_path / "whole"))
    with contextlib.redirect_stdout(io.StringIO()):
        whole.learn(4)
    resumed = build(None)
    resumed.load(str(tmp_path / "whole" / "model_2.pt"))
    assert resumed.env_state_restored
    with contextlib.redirect_stdout(io.StringIO()):
        resumed.learn(2)
    for a, b in zip(whole.alg.actor.parameters(), resumed.alg.actor.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(whole.env.q, resumed.env.q) and torch.equal(whole.env.u, resumed.env.u)


def test_a_velocity_run_resumed_with_other_envs_keeps_its_curriculum(tmp_path):
    """A checkpoint of 4 envs resumed with 6 (e.g. a small batch for the curriculum, a larger one after it): the
    envs start new episodes, but the curriculum's clock goes on from where the checkpoint left it (before, the
    curriculum silently started again from its first step), and the steps after it count on from there."""
    import contextlib
    import io

    from diffloco_ext.learning import make_runner
    from diffloco_ext.tasks import registry

    task = "DiffLoco-Velocity-Flat-AnymalD"

    def build(num_envs, log_dir):
        torch.manual_seed(0)
        env_cfg = registry.load_cfg(task)
        env_cfg.num_envs = num_envs
        env_cfg.commands.curriculum_steps = 6
        env_cfg.commands.curriculum_initial_lin_vel_x = (0.5, 1.0)
        agent = registry.load_agent_cfg(task, "shac")
        agent.num_steps_per_env, agent.save_interval = 4, 2
        with contextlib.redirect_stdout(io.StringIO()):
            return make_runner(registry.make_env(task, env_cfg), agent, log_dir=log_dir)

    first = build(4, str(tmp_path / "first"))
    with contextlib.redirect_stdout(io.StringIO()):
        first.learn(2)
    assert first.env.commands.steps == 8 and first.env.curriculum_progress == 1.0
    resumed = build(6, None)
    assert resumed.env.commands.steps == 0 and resumed.env.curriculum_progress == 0.0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        resumed.load(str(tmp_path / "first" / "model_2.pt"))
    assert not resumed.env_state_restored  # the envs' own states are not this run's
    assert resumed.env.commands.steps == 8 and resumed.env.curriculum_progress == 1.0
    assert resumed.env.commands.steps_since_done == 2
    assert "differ from this run's (6)" in out.getvalue()
    with contextlib.redirect_stdout(io.StringIO()):
        resumed.learn(1)
    assert resumed.env.commands.steps == 12 and resumed.env.num_envs == 6
