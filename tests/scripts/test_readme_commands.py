"""The README's quickstart runs as printed: each of its commands, in the order shown, with tiny arguments appended
(one iteration, a few envs, a one-episode scenario, logs in a temporary folder; a later flag wins in argparse)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Appended to each quickstart command, by script: the command's tiny form.
TINY = {
    "list_envs.py": [],
    "train.py": ["--max_iterations", "1", "--num_envs", "4", "agent.save_interval=1"],
    "play.py": ["--steps", "5", "--video_length", "5", "--num_envs", "2"],
    "validate.py": ["--only", "random_commands", "--no_reference"],
}
TINY_SCENARIOS = """extends: anymal_d
settings: {seeds: [0]}
scenarios:
  - {name: random_commands, description: one short episode, episodes: 1, duration_s: 2.0}
"""


def readme_commands(section: str) -> list[str]:
    """The commands of the first bash block of the README's ``section``, continuation lines joined, comments cut."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(rf"## {section}.*?```bash\n(.*?)```", text, re.S).group(1)
    block = block.replace("\\\n", " ")
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def quickstart_commands() -> list[str]:
    return readme_commands("Quickstart")


def test_the_readmes_quickstart_runs_as_printed(tmp_path):
    commands = quickstart_commands()
    scripts = [next(os.path.basename(w) for w in shlex.split(c) if w.endswith(".py")) for c in commands]
    assert set(scripts) == set(TINY), scripts  # a new command in the README needs its tiny form here
    scenarios = tmp_path / "tiny.yaml"
    scenarios.write_text(TINY_SCENARIOS)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run_dir = None
    for command, script in zip(commands, scripts):
        words = shlex.split(command)
        if run_dir is not None:
            words = [w.replace("logs/shac/anymal_d_flat/<run>", run_dir) for w in words]
        assert not any("<" in w for w in words), words
        extra = list(TINY[script])
        if script in ("train.py", "play.py"):
            extra += ["--log_root", str(tmp_path / "logs")]
        if script == "validate.py":
            extra += ["--scenarios", str(scenarios), "--out", str(tmp_path / "report")]
        proc = subprocess.run([os.path.join(ROOT, words[0]), *words[1:], *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        # validate exits 1 on FAIL (a 1-iteration policy falls): only bad input (2) or a crash is an error here
        ok = proc.returncode in ((0, 1) if script == "validate.py" else (0,))
        assert ok, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        if script == "train.py" and "--algo shac" in command:
            root = tmp_path / "logs" / "shac" / "anymal_d_flat"
            run_dir = str(max(root.iterdir(), key=lambda d: d.name))
        if script == "play.py":  # play exports the policy the validation reads
            assert os.path.isfile(os.path.join(run_dir, "exported", "policy.pt")), proc.stdout[-2000:]
        if script == "validate.py":
            assert "[validate]" in proc.stdout and ("PASS" in proc.stdout or "FAIL" in proc.stdout)
    assert run_dir is not None


def test_the_readmes_override_example_runs_as_printed(tmp_path):
    """The README's example of overrides trains (one iteration) with every override applied as printed."""
    (command,) = readme_commands("Configuration and overrides")
    words = shlex.split(command)
    assert words[1] == "scripts/train.py" and any(w.startswith("env.") for w in words), words
    tiny = [*TINY["train.py"], "agent.max_iterations=1"]  # after the example's own agent.max_iterations: it wins
    argv = [os.path.join(ROOT, words[0]), *words[1:], *tiny, "--log_root", str(tmp_path / "logs")]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = (tmp_path / "logs" / "shac" / "anymal_d_flat").iterdir()
    env_yaml = (run / "params" / "env.yaml").read_text()
    overrides = [w for w in words if w.startswith(("env.", "agent."))]
    assert "kappa: 1000" in env_yaml.replace("1000.0", "1000") and overrides, env_yaml[:500]
    assert "model_1.pt" in {p.name for p in run.iterdir()}
