"""Plots of a velocity policy's motion: commanded against measured base velocity in the validators, and its gait
(joint angles, foot heights against the foot-height reference, contact pattern) in the training simulator."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..tasks.velocity.gaits import swing_height  # noqa: E402

STANCE_HEIGHT = 0.01  # m: a foot sphere's bottom this close to the ground counts as stance in the gait plot


def velocity_plot(results: dict, out: str) -> None:
    """Commanded against measured base velocity over time (Schwarke et al., Fig. 6 style), one column per validator:
    ``results`` maps a validator's name to an object whose ``traces`` hold the traced episode's arrays ``[T, 1, ...]``
    (``time`` [T] in s, ``command``, ``lin_vel_b``, ``ang_vel_b``: base frame, m/s and rad/s)."""
    fig, axes = plt.subplots(3, len(results), figsize=(6 * len(results), 8), sharex=True, squeeze=False)
    for col, (name, stats) in enumerate(results.items()):
        tr = stats.traces
        t = tr["time"]
        for row, (label, cmd, meas) in enumerate((("v_x (m/s)", tr["command"][:, 0, 0], tr["lin_vel_b"][:, 0, 0]),
                                                 ("v_y (m/s)", tr["command"][:, 0, 1], tr["lin_vel_b"][:, 0, 1]),
                                                 ("w_z (rad/s)", tr["command"][:, 0, 2], tr["ang_vel_b"][:, 0, 2]))):
            ax = axes[row, col]
            ax.plot(t, cmd, "k--", label="command")
            ax.plot(t, meas, label="measured")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(name)
                ax.legend(loc="upper right")
        axes[-1, col].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)



def gait_plot(env, policy, out: str, seconds: float = 3.0) -> np.ndarray:
    """Joint trajectories, foot heights against the sinusoidal reference, and the contact pattern of env 0 of the
    velocity env ``env`` (set up by the caller: e.g. hard contact, no noise, no randomisation) walking forward at
    0.6 m/s under ``policy`` (observations -> actions) for ``seconds``; written as a PNG at ``out``. Returns the
    generalised coordinates of env 0 at every policy step, ``[T, nq]`` (for a video)."""
    env.cfg.commands.heading_command = False
    env.reset()
    env.commands.command[:] = torch.tensor([0.6, 0.0, 0.0])
    env.commands.is_standing_env[:] = False
    env.commands.time_left[:] = 1e9
    steps = int(seconds / env.step_dt)
    joints, heights, refs, contacts, qs = [], [], [], [], []
    obs = env.get_observations()
    with torch.inference_mode():
        for t in range(steps):
            obs, _, _, _ = env.step(policy(obs["policy"].float()).to(env.dtype))
            step = env.last_output
            joints.append(env.q[0, 7:][env.to_isaaclab].numpy())
            heights.append((step.foot_pos[0, :, 2] - env.foot_radius - env.ground_height[0]).numpy())
            time_s = env.episode_length_buf[:1].to(env.dtype) * env.step_dt
            refs.append(swing_height(time_s, env.foot_phase, env.cfg.gait, torch.tensor([True]))[0].numpy())
            contacts.append(heights[-1] < STANCE_HEIGHT)
            qs.append(env.q[0].double().numpy())
    t = np.arange(1, steps + 1) * env.step_dt
    joints, heights, refs, contacts = map(np.asarray, (joints, heights, refs, contacts))
    fig, axes = plt.subplots(3, 1, figsize=(11, 10), sharex=True)
    # one colour per leg, one line style per joint type, so that the 12 traces stay apart (the default cycle has 10)
    leg_colours = {"LF": "tab:blue", "RF": "tab:orange", "LH": "tab:green", "RH": "tab:red"}
    styles = {"HAA": ":", "HFE": "--", "KFE": "-"}
    for j, name in enumerate(env.joint_names):
        leg, kind = name.split("_")[0], name.split("_")[-1]
        axes[0].plot(t, joints[:, j], lw=1, label=name, color=leg_colours.get(leg), linestyle=styles.get(kind, "-"))
    axes[0].set_ylabel("joint angle (rad)")
    axes[0].legend(ncol=6, fontsize=7)
    for f, name in enumerate(env.foot_names):
        line, = axes[1].plot(t, heights[:, f], label=name)
        axes[1].plot(t, refs[:, f], "--", color=line.get_color(), lw=1)
    axes[1].set_ylabel("foot height (m); dashed: reference")
    axes[1].legend(ncol=4, fontsize=8)
    for f, name in enumerate(env.foot_names):
        on = contacts[:, f]
        axes[2].fill_between(t, f - 0.4, f + 0.4, where=on, step="mid", color="C0")
    axes[2].set_yticks(range(len(env.foot_names)), env.foot_names)
    axes[2].set_xlabel("time (s)")
    axes[2].set_title(f"contact pattern (stance shaded: foot within {STANCE_HEIGHT * 100:.0f} cm of the ground)")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("ANYmal D, SHAC policy, v_x* = 0.6 m/s, training simulator in hard contact")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return np.asarray(qs)
