"""The ``simjax`` command line.

Subcommands:

- ``simjax info MODEL``: the model's components, coordinates, actuators and state
  variables (as ``opensim-cmd info``), and any content skipped on loading;
- ``simjax validate MODEL``: load the model in simjax and in OpenSim and compare,
  at random valid states, every quantity both compute (``simjax.io.osim.validate``),
  printing the worst errors per quantity; exit status 1 if any exceeds its tolerance.
- ``simjax moco STUDY.omoco [--output PATH]``: solve a MocoStudy setup file
  (``simjax.optimize.study.run_study``) and write its solution as a MocoTrajectory
  ``.sto``; exit status 1 if the solver did not succeed or the study is unsupported.
- ``simjax sweep SPEC [--out DIR]``: run a sweep (``simjax.sweep.sweep``): the spec's
  cases simulated in chunks, each finished chunk a Parquet file in ``DIR``; run again
  after an interruption, it skips the finished chunks. Exit status 1 for bad spec
  input (nothing runs); a failed case does not stop the sweep (its row holds its
  result code) and is counted in the summary line. ``--processes N`` runs it in N
  processes joined by JAX's distributed runtime on the loopback address.

``MODEL`` is an ``.osim`` file or the name of a shipped model (``simjax info arm26``).
More subcommands plug in with ``register_subcommand``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable

from . import models

__all__ = ["Subcommand", "SUBCOMMANDS", "register_subcommand", "main", "resolve_model_path"]


@dataclasses.dataclass(frozen=True)
class Subcommand:
    """A subcommand: ``configure(parser)`` adds its arguments; ``run(args) -> int``
    does the work and returns the exit status."""

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: subcommand name -> Subcommand, in the order ``--help`` lists them
SUBCOMMANDS: dict[str, Subcommand] = {}


def register_subcommand(name: str, help: str, configure, run) -> Subcommand:
    """Add a subcommand (see ``Subcommand``). **Returns:** it."""
    sub = Subcommand(help, configure, run)
    SUBCOMMANDS[name] = sub
    return sub


#: an existing file path, or the file of a shipped model of that name (``models.resolve``)
resolve_model_path = models.resolve


def _model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="an .osim file, or the name of a shipped model")


# -- info ------------------------------------------------------------------------------------


def _fmt(x) -> str:
    return f"{float(x):.6g}"


def _info(args: argparse.Namespace) -> int:
    from .io.osim import read_osim
    from .io.osim.errors import OsimWarning

    path = resolve_model_path(args.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model, report = read_osim(path, strict=args.strict)
    out = [f"Model: {model.name}", f"File: {path}"]
    if model.credits:
        out.append(f"Credits: {model.credits}")
    if report.unsupported:
        out.append(f"Skipped content simjax does not model yet ({len(report.unsupported)}):")
        out += [f"  {u}" for u in report.unsupported]
    entries = list(model.walk())
    out.append(f"Components ({len(entries)}):")
    out += [f"  {p}  [{type(c).__name__}]" for p, c in entries]
    try:
        system = model.build()
    except Exception as e:  # still show what was read
        out.append(f"(the model does not build: {e})")
        print("\n".join(out))
        return 1
    tree = system.topology.tree
    out.append(f"Coordinates ({len(system.coordinate_paths)}):")
    for p in system.coordinate_paths:
        c = model.find(p)
        flags = [f for f in ("locked", "clamped", "prescribed") if getattr(c, f)]
        out.append(
            f"  {p}  {tree.coordinates[p].motion_type}  default {_fmt(c.default_value)}  range "
            f"[{_fmt(c.range[0])}, {_fmt(c.range[1])}]" + (f"  ({', '.join(flags)})" if flags else "")
        )
    out.append(f"Actuators ({len(system.actuator_paths)}):")
    for p in system.actuator_paths:
        out.append(f"  {p}  [{type(model.find(p)).__name__}]")
    names = system.state_variable_names
    out.append(f"State variables ({len(names)}):")
    out += [f"  {n}" for n in names]
    print("\n".join(out))
    return 0


def _configure_info(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument(
        "--strict", action="store_true", help="fail on content simjax does not model yet (default: skip and list it)"
    )


# -- validate -----------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    try:
        import opensim
    except ImportError:
        print("simjax validate needs the opensim Python package (pip install opensim)", file=sys.stderr)
        return 2
    try:
        opensim.Logger.setLevelString("Error")
    except Exception:
        pass
    from .io.osim.validate import CHECKS, format_results, validate

    unknown = [c for c in (args.check or []) if c not in CHECKS]
    if unknown:
        print(f"unknown check(s) {', '.join(unknown)}; available: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    if os.path.isdir(args.model):
        return _validate_folder(args, opensim.GetVersion())
    path = resolve_model_path(args.model)
    results = validate(path, n_states=args.states, seed=args.seed, checks=args.check)
    print(f"{path}: simjax vs OpenSim {opensim.GetVersion()} at {args.states} random states")
    print(format_results(results))
    return 0 if all(r.passed for r in results) else 1


def _validate_folder(args: argparse.Namespace, version: str) -> int:
    """Validate every ``.osim`` of a folder; print a Markdown table, a row per model."""
    from .io.osim.validate import CHECKS, validate

    names = [c for c in CHECKS if args.check is None or c in args.check]
    print(
        f"simjax vs OpenSim {version}, {args.states} random states per model (`simjax validate FOLDER`): "
        "the worst relative error of each quantity (max |simjax - OpenSim| / max |OpenSim|), "
        "'-' where a check does not apply.\n"
    )
    print("| model | " + " | ".join(names) + " | status |")
    print("|---" * (len(names) + 2) + "|")
    failed = 0
    for file in sorted(f for f in os.listdir(args.model) if f.endswith(".osim")):
        try:
            results = {
                r.name: r
                for r in validate(
                    os.path.join(args.model, file), n_states=args.states, seed=args.seed, checks=args.check
                )
            }
        except Exception as e:  # a row per model, whatever goes wrong in one
            failed += 1
            print(
                f"| {file} | " + " | ".join("" for _ in names) + f" | error: {type(e).__name__}: "
                f"{str(e).splitlines()[0][:120]} |",
                flush=True,
            )
            continue
        cells = [f"{results[n].max_rel:.1e}" if n in results else "-" for n in names]
        bad = [n for n, r in results.items() if not r.passed]
        failed += bool(bad)
        print(f"| {file} | " + " | ".join(cells) + f" | {'FAIL: ' + ', '.join(bad) if bad else 'ok'} |", flush=True)
    return 1 if failed else 0


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="an .osim file, the name of a shipped model, or a folder: every .osim in it, reported as a Markdown table",
    )
    parser.add_argument("-n", "--states", type=int, default=50, help="number of random states (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--check", action="append", help="run only this check (repeatable)")


# -- simulate ----------------------------------------------------------------------------------------


def _simulate(args: argparse.Namespace) -> int:
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    from .simulate import simulate
    from .io.osim import load_osim
    from .io.osim.errors import OsimWarning

    path = resolve_model_path(args.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        model = load_osim(path, strict=not args.skip_unsupported)
    system = model.build()
    state = system.default_state()
    n_act = len(system.actuator_names)
    controls = None
    if args.controls is not None:
        controls = jnp.full(n_act, args.controls)
    if system.topology.nz and _has_muscles(system):
        from .muscles.equilibrium import equilibrate_muscles

        state = equilibrate_muscles(system, state, controls)
    ts = jnp.linspace(0.0, args.final_time, args.outputs)
    kwargs = dict(solver=args.solver, accuracy=args.accuracy, ts=ts, progress=args.progress)
    if args.dt is not None:
        kwargs["dt"] = args.dt
    t0 = time.perf_counter()
    traj = simulate(system, state, args.final_time, controls, **kwargs)
    jax.block_until_ready(traj.q)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    traj = simulate(system, state, args.final_time, controls, **kwargs)
    jax.block_until_ready(traj.q)
    t_run = time.perf_counter() - t0
    lines = [
        f"simjax simulate {model.name}: {len(system.coordinate_names)} coordinates, {n_act} actuators, "
        f"{system.topology.nz} auxiliary states",
        f"  integrated 0 -> {args.final_time:g} s with {args.solver} (accuracy {args.accuracy:g}): "
        f"{int(traj.num_steps)} steps, result code {int(traj.result)}",
        f"  wall time: {t_run * 1e3:.1f} ms after compilation ({args.final_time / t_run:.1f}x real time); "
        f"first call incl. compilation {t_first:.1f} s",
        "  final coordinates:",
    ]
    final = traj.state(-1)
    for name, info_path in zip(system.coordinate_names, system.coordinate_paths):
        info = system.tree.coordinates[info_path]
        value = float(final.q[info.q]) if info.q >= 0 else float("nan")
        lines.append(f"    {name:<24} {value: .6f}   speed {float(final.u[info.u]): .6f}")
    if args.out:
        traj.write_states(args.out)
        lines.append(f"  states written to {args.out} ({len(traj)} rows)")
    print("\n".join(lines))
    ok = int(traj.result) == 0 and bool(np.all(np.isfinite(np.asarray(traj.y))))
    return 0 if ok else 1


def _has_muscles(system) -> bool:
    try:
        from .muscles.muscle import Muscle
    except ImportError:
        return False
    return any(isinstance(c, Muscle) for c in system.model.components_of())


def _configure_simulate(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument("--final-time", type=float, default=1.0, help="end time in s (default 1)")
    parser.add_argument("--out", help="write an OpenSim states .sto file")
    parser.add_argument(
        "--solver", default="rkm", help="rkm (default), tsit5, dopri5, kvaerno5, rk4, semi_implicit_euler"
    )
    parser.add_argument("--accuracy", type=float, default=1e-5, help="integrator accuracy (default 1e-5)")
    parser.add_argument("--dt", type=float, help="step size for the fixed-step solvers")
    parser.add_argument(
        "--controls", type=float, help="a constant control for every actuator (default: the model's controllers)"
    )
    parser.add_argument("--outputs", type=int, default=101, help="number of output times (default 101)")
    parser.add_argument("--progress", action="store_true", help="print progress while integrating")
    parser.add_argument(
        "--skip-unsupported", action="store_true", help="skip content simjax does not model yet instead of failing"
    )


def _run(args: argparse.Namespace) -> int:
    from .tools import SetupError, run

    try:
        written = run(args.setup)
    except SetupError as e:
        print(f"simjax run: {e}", file=sys.stderr)
        return 1
    for what, path in written.items():
        print(f"{what}: {path}")
    return 0


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "setup",
        help="an OpenSim tool setup file (.xml): InverseKinematicsTool, InverseDynamicsTool, ScaleTool, AnalyzeTool, "
        "ForwardTool, RRATool, CMCTool",
    )


def _moco(args: argparse.Namespace) -> int:
    from .optimize.study import StudyError, run_study

    try:  # (run_study prints the summary and the iteration log the study's verbosity asks for)
        solution, path = run_study(args.study, args.output, strict=not args.skip_unsupported)
    except StudyError as e:
        print(f"simjax moco: {e}", file=sys.stderr)
        return 1
    print(f"solution: {path}")
    return 0 if int(solution.status) == 0 else 1


def _configure_moco(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help="a MocoStudy setup file (.omoco), as MocoStudy.print writes it")
    parser.add_argument(
        "--output",
        help="the solution's MocoTrajectory .sto (default: "
        "<results_directory>/<study name>_solution.sto, next to the study)",
    )
    parser.add_argument(
        "--skip-unsupported",
        action="store_true",
        help="skip model content simjax does not model yet instead of failing",
    )


register_subcommand(
    "run", "run an OpenSim tool from its setup file, writing OpenSim's output files", _configure_run, _run
)
register_subcommand(
    "moco",
    "solve a Moco study (.omoco) by direct collocation, writing its solution as Moco does",
    _configure_moco,
    _moco,
)
register_subcommand(
    "simulate", "run a forward simulation of a model and print a report", _configure_simulate, _simulate
)
register_subcommand(
    "info", "list a model's components, coordinates, actuators and state variables", _configure_info, _info
)
register_subcommand(
    "validate", "compare simjax with OpenSim on a model at random states", _configure_validate, _validate
)


# -- view --------------------------------------------------------------------------------------------


def _view(args: argparse.Namespace) -> int:
    from .view import MotionError, ViewWarning, load_scene, write_animation, write_html

    with warnings.catch_warnings():
        warnings.simplefilter("always", ViewWarning)
        scene = load_scene(args.model, geometry_path=tuple(args.geometry_path or ()))
    follow = args.follow
    if follow is not None and follow not in scene.frame_paths:
        hits = [p for p in scene.frame_paths if p.rsplit("/", 1)[-1] == follow]
        if len(hits) != 1:
            print(
                f"simjax view: --follow {follow!r} names no frame of the model; its bodies are "
                f"{', '.join(scene.body_paths)}",
                file=sys.stderr,
            )
            return 2
        follow = hits[0]
    try:
        tracks = [scene.frames(args.motion, rate=args.rate, color_by=args.color_by, markers=args.markers)]
        if args.overlay:
            tracks.append(scene.frames(args.overlay, times=tracks[0].times, color_by=args.color_by))
    except MotionError as e:
        print(f"simjax view: {e}", file=sys.stderr)
        return 1
    if args.html:
        write_html(args.html, scene, *tracks, follow=follow)
        print(f"HTML: {args.html} ({len(tracks[0])} frames)")
    if args.gif:
        n = write_animation(args.gif, scene, *tracks, follow=follow, stride=args.stride, fps=args.fps)
        print(f"animation: {args.gif} ({n} frames)")
    if args.live or not (args.html or args.gif):
        from .view import Viewer

        viewer = Viewer(scene, *tracks, host=args.host, port=args.port, follow=follow, play=True)
        print(f"live viewer at {viewer.url} (Ctrl-C to stop)", flush=True)
        viewer.serve_forever()
    return 0


def _configure_view(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument(
        "--motion",
        help="a Trajectory states file (.sto) or a coordinates motion (.mot, .sto) to "
        "play (default: the model's default pose)",
    )
    parser.add_argument("--overlay", help="a second motion drawn over the first, translucent (e.g. a reference)")
    parser.add_argument("--markers", help="experimental markers to show (.trc)")
    parser.add_argument("--html", help="write a self-contained HTML page (opens offline in any browser)")
    parser.add_argument("--gif", help="write an animated .gif (or .mp4 with ffmpeg)")
    parser.add_argument("--live", action="store_true", help="start the live viewer (the default without --html/--gif)")
    parser.add_argument("--follow", help="a body (name or path) for the camera to follow")
    parser.add_argument("--rate", type=float, help="resample the motion to this many frames per second")
    parser.add_argument(
        "--color-by",
        default="activation",
        choices=("activation", "tension", "none"),
        help="what colours the muscles (default activation)",
    )
    parser.add_argument("--geometry-path", action="append", help="a folder to search for mesh files (repeatable)")
    parser.add_argument("--stride", type=int, default=1, help="use every n-th frame in the animation (default 1)")
    parser.add_argument("--fps", type=float, default=20.0, help="frames per second of the animation (default 20)")
    parser.add_argument("--host", default="127.0.0.1", help="the live viewer's address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="the live viewer's port (default: a free one)")


register_subcommand(
    "view",
    "show a model in 3D, playing a motion: live in the browser, as HTML, or as a GIF/MP4",
    _configure_view,
    _view,
)


# -- sweep ------------------------------------------------------------------------------------------


def _sweep(args: argparse.Namespace) -> int:
    if args.processes > 1 and args.process_id is None:
        return _sweep_processes(args)
    from .sweep import SpecError, sweep

    out = args.out or os.path.splitext(args.spec)[0] + ".sweep"
    try:
        summary = sweep(args.spec, out, cases=args.cases, progress=not args.quiet)
    except (SpecError, ValueError) as e:
        print(f"simjax sweep: {e}", file=sys.stderr)
        return 1
    if not args.process_id:
        print(
            f"simjax sweep: {summary.n_cases} cases in {summary.n_chunks} files in {summary.out_dir} "
            f"({summary.chunks_run} chunks run, {summary.chunks_skipped} finished before; {summary.failed} "
            f"failed case(s) in this run) in {summary.seconds:.1f} s"
        )
    return 0


def _sweep_processes(args: argparse.Namespace) -> int:
    """``--processes N``: N processes on this machine joined by JAX's distributed runtime
    on the loopback address, each with its share of the devices; the first one's exit
    status, or the first failure's (the others are then stopped)."""
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # (each joins the runtime before simjax is imported: before JAX starts its backends)
    boot = (
        "import sys, jax; jax.distributed.initialize(sys.argv[1], num_processes=int(sys.argv[2]), "
        "process_id=int(sys.argv[3])); from simjax.cli import main; sys.exit(main(sys.argv[4:]))"
    )
    base = [sys.executable, "-c", boot, f"127.0.0.1:{port}", str(args.processes)]
    sweep_args = ["sweep", args.spec, "--processes", str(args.processes)]
    for flag, value in (("--out", args.out), ("--cases", args.cases)):
        if value:
            sweep_args += [flag, value]
    if args.quiet:
        sweep_args.append("--quiet")
    children = [
        subprocess.Popen(base + [str(i)] + sweep_args + ["--process-id", str(i)]) for i in range(args.processes)
    ]
    status = 0
    try:
        running = list(children)
        while running:
            for child in list(running):
                code = child.poll()
                if code is None:
                    continue
                running.remove(child)
                if code != 0:
                    status = status or code
                    for other in running:  # (they would wait for it at the next collective)
                        other.kill()
            time.sleep(0.05)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
    return status or children[0].returncode


def _configure_sweep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a sweep spec (.json, or .toml on Python 3.11+): model, cases, t_final, outputs")
    parser.add_argument(
        "--out", help="the output folder of Parquet files (default: SPEC without its extension, plus .sweep)"
    )
    parser.add_argument("--cases", help="a case table (.csv or .parquet) instead of the spec's")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run in this many processes on this machine, "
        "joined by JAX's distributed runtime on the loopback address (default 1)",
    )
    parser.add_argument("--process-id", type=int, help=argparse.SUPPRESS)  # (set for the N processes)


register_subcommand(
    "sweep", "run a sweep of simulations over a table of cases, resumable, written as Parquet", _configure_sweep, _sweep
)


# -- entry point -----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simjax", description="simjax: differentiable musculoskeletal simulation")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, sub in SUBCOMMANDS.items():
        p = subs.add_parser(name, help=sub.help, description=sub.help)
        sub.configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``).

    **Returns:** the exit status (0 success, 1 a failed check or an error in the
    model, 2 a usage problem).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    import jax

    jax.config.update("jax_enable_x64", True)
    from .component import ModelError

    try:
        return SUBCOMMANDS[args.command].run(args)
    except (ModelError, FileNotFoundError) as e:
        print(f"simjax {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
