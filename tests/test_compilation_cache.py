"""simjax's persistent compilation cache (issue 42 item 4): the folder it uses, the
user's own JAX setting left alone, the off switch. Each case runs in a fresh process,
since the cache is chosen when simjax is imported."""

import json
import os
import subprocess
import sys

_PROBE = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import simjax as sj
from simjax import compilation_cache
out = {"folder": compilation_cache.folder()}
if sys.argv[1] == "dynamics":
    system = sj.models.load("double_pendulum").build()
    out["udot"] = [float(x) for x in sj.forward_dynamics(system, system.default_state())]
print(json.dumps(out))
"""


def _run(what: str, env: dict) -> dict:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SIMJAX_CACHE_DIR", "SIMJAX_NO_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR")
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, what], env={**base, **env}, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_compiled_programs_fill_simjaxs_cache_folder(tmp_path):
    """A program without a host callback (forward dynamics) is written to
    SIMJAX_CACHE_DIR, and a second process finds it there (the same answer)."""
    folder = tmp_path / "cache"
    env = {"SIMJAX_CACHE_DIR": str(folder), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    first = _run("dynamics", env)
    assert first["folder"] == str(folder) and os.listdir(folder)
    files = set(os.listdir(folder))
    assert _run("dynamics", env) == first and set(os.listdir(folder)) == files  # (nothing new: found)


def test_the_users_own_jax_cache_folder_is_left_alone(tmp_path):
    mine, simjaxs = tmp_path / "mine", tmp_path / "simjax"
    got = _run("import", {"JAX_COMPILATION_CACHE_DIR": str(mine), "SIMJAX_CACHE_DIR": str(simjaxs)})
    assert got["folder"] == str(mine)
    assert not simjaxs.exists()


def test_the_off_switch(tmp_path):
    folder = tmp_path / "cache"
    got = _run("import", {"SIMJAX_CACHE_DIR": str(folder), "SIMJAX_NO_COMPILATION_CACHE": "1"})
    assert got["folder"] is None
    assert not folder.exists()
