"""JAX's persistent compilation cache, on by default: a second process compiles nothing
that an earlier one compiled on this machine.

Imported first by ``import simjax``, this module points JAX's persistent compilation
cache at a per-user folder:

- ``SIMJAX_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/simjax/jax``, else
  ``~/.cache/simjax/jax``;
- not where the user has chosen JAX's own cache folder (``JAX_COMPILATION_CACHE_DIR``,
  or ``jax.config.update("jax_compilation_cache_dir", ...)`` before importing
  simjax): their setting is left as it is;
- not at all with ``SIMJAX_NO_COMPILATION_CACHE=1``.

JAX decides what is worth caching (programs that took at least
``jax_persistent_cache_min_compile_time_secs`` to compile, 1 s by default) and keys
each entry by the program, the compile options, the device and JAX's version, so a
stale entry is never used.

JAX keeps no program that calls back to the host, and Equinox's run-time checks
(``eqx.error_if``) are host callbacks: ``simulate``'s and the collocation solve's
programs have them (Diffrax's checks of the output times and its ``throw``; the control
bounds' check), so they are compiled again in each process for now; what has none
(forward dynamics, the tools' solves, ...) is kept.
"""

from __future__ import annotations

import os
import warnings

import jax

__all__ = ["ENV_DIR", "ENV_OFF", "default_dir", "enable", "folder"]

#: environment variable: the cache folder
ENV_DIR = "SIMJAX_CACHE_DIR"
#: environment variable: ``1`` turns simjax's default cache off
ENV_OFF = "SIMJAX_NO_COMPILATION_CACHE"


def default_dir() -> str:
    """The per-user cache folder: ``SIMJAX_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/simjax/jax``, else ``~/.cache/simjax/jax``."""
    if os.environ.get(ENV_DIR):
        return os.path.abspath(os.path.expanduser(os.environ[ENV_DIR]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "simjax", "jax")


def folder() -> str | None:
    """The folder JAX's persistent cache uses now (simjax's or the user's), or
    ``None`` where it is off."""
    if not jax.config.jax_enable_compilation_cache:
        return None
    return jax.config.jax_compilation_cache_dir or None


def enable(path: str | os.PathLike | None = None) -> str | None:
    """Point JAX's persistent compilation cache at ``path`` (default ``default_dir()``),
    creating the folder.

    **Returns:** the folder, or ``None`` where it cannot be created (a warning names it
    and the environment variables that choose another or turn the cache off).
    """
    path = os.path.abspath(os.fspath(path)) if path is not None else default_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        warnings.warn(
            f"simjax: the compilation cache folder {path!r} cannot be created ({e}); compiling without "
            f"it. Set {ENV_DIR} to another folder, or {ENV_OFF}=1 to stop trying.",
            stacklevel=2,
        )
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    return path


def _enable_by_default() -> None:
    """What ``import simjax`` does: ``enable()`` unless turned off or the user has set
    JAX's own folder."""
    if os.environ.get(ENV_OFF, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    if jax.config.jax_compilation_cache_dir:  # (the user's own choice)
        return
    enable()


_enable_by_default()
