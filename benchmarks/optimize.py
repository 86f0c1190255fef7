"""Trajectory optimisation, simjax against OpenSim Moco 4.6 in one run:
``python -m benchmarks.optimize [--meshes 50,200]`` (also part of ``python -m benchmarks``).

The problems are tests/_moco.py's, each solved by both engines on the same ``.osim``
file with the same transcription, mesh and tolerances (Moco's ``MocoCasADiSolver``
as ``_moco.study_from_problem`` sets it up; simjax's ``optimize.Problem`` built from
the same problem description, ``optimize.moco_options(tol, constraint_tol)`` from the
study's settings):

- the sliding mass in minimum time (``_moco.moco_sliding_mass``), trapezoidal;
- the pendulum swing-up with least effort (``_moco.moco_pendulum_swing_up``),
  Hermite-Simpson;

each with 50 mesh intervals and, to show how the time grows with the mesh (simjax's
KKT matrix is block tridiagonal, factorized in time linear in the number of mesh
points), 200; and MocoInverse of gait10dof18musc walking (``measure_inverse``: Moco's
own ``MocoInverse`` against ``optimize.inverse``'s problem, tests/_moco_gait.py).
``--inverse-agreement 1e-6`` instead solves MocoInverse by both engines to a tight
tolerance and compares their activations (``inverse_agreement``);
``--track-agreement 1e-6 [--track-window 0.6,1.4]`` solves MocoTrack of the same walking
motion (the same model edits, the filtered IK coordinates as the states reference) by
both engines to a tight tolerance and compares their objectives and coordinates
(``track_agreement``).

simjax: ``collocation.transcribe``, then ``eqx.filter_jit(ipm.solve)`` (the program
``optimize.solve`` runs) traced and lowered, then compiled by XLA, each timed; then the
compiled solve, once to warm up and best of 3 (``jax.block_until_ready``). Moco: the
wall time of ``study.solve()`` (``_moco.solve``), once to warm up and best of 3, on
one study (Moco's default guess each time). Reported: both times, their ratio
(simjax / Moco), the iterations, the objectives and their difference, and the time
per iteration at 200 intervals over that at 50.

Pin to one core to compare with Moco's single thread, as the suite does
(``taskset -c 0 python -m benchmarks.optimize``); the compile times are then those of
one core. Takes ~4 minutes on one core, most of it XLA compiling four programs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402

import simjax as sj  # noqa: E402
from simjax import optimize as sjopt  # noqa: E402
from simjax.optimize import collocation, ipm  # noqa: E402

#: (problem, tests/_moco.py's function solving it, transcription)
PROBLEMS = (
    ("sliding mass, minimum time", "moco_sliding_mass", "trapezoidal"),
    ("pendulum swing-up, least effort", "moco_pendulum_swing_up", "hermite-simpson"),
)
MESHES = (50, 200)


def _moco_helpers():
    """tests/_moco.py (tests/ is not a package: put it on the path)."""
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import _moco

    return _moco


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def _simjax_timed(problem, mesh, scheme, options, interpolate_controls, repeat, sparse_derivatives=False) -> dict:
    """simjax's solve of ``problem``: transcription (with ``sparse_derivatives``, the
    pattern's detection too), trace and lowering, XLA's compilation, the first run and
    the best of ``repeat``, each timed (s), and the ``solution``."""
    t = time.perf_counter()
    nlp, z0, g0, _ = collocation.transcribe(
        problem, mesh, scheme, interpolate_controls, sparse_derivatives=sparse_derivatives
    )
    transcribe_s = time.perf_counter() - t
    t = time.perf_counter()
    lowered = eqx.filter_jit(ipm.solve).lower(nlp, z0, g0, options, None, False)
    lower_s = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    run = lambda: compiled(nlp, z0, g0, options, None, False)  # noqa: E731
    t = time.perf_counter()
    sol = jax.block_until_ready(run())
    first_s = time.perf_counter() - t
    return {
        "simjax_transcribe": transcribe_s,
        "simjax_trace_lower": lower_s,
        "simjax_xla_compile": compile_s,
        "simjax_compile": lower_s + compile_s,
        "simjax_first_run": first_s,
        "simjax": _best(run, repeat),
        "solution": sol,
    }


def gait_model():
    """gait10dof18musc with the model edits tests/_moco_gait.py's ``gait_model_processor``
    makes in Moco (external loads, rigid tendons, DeGroote-Fregly muscles without passive
    fiber force, a 1.5x wider active force-length curve, reserves of optimal force 1), by
    simjax's ``model_edits``; needs no OpenSim. **Returns:** the built ``System``."""
    import functools

    _moco_helpers()
    import _moco_gait as mg

    from simjax.optimize import model_edits as edits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = edits.ModelProcessor(
            str(mg.MODEL_PATH),
            functools.partial(edits.add_external_loads, path=str(mg.GRF_XML_PATH)),
            edits.ignore_tendon_compliance,
            edits.replace_muscles_with_degroote,
            edits.ignore_passive_fiber_forces,
            functools.partial(edits.scale_active_fiber_force_curve_width, scale_factor=mg.ACTIVE_FORCE_WIDTH_SCALE),
            functools.partial(edits.add_reserves, optimal_force=mg.RESERVE_OPTIMAL_FORCE),
        ).process()
    return model.build()


def gait_kinematics():
    """The walking trial's IK coordinates low-pass filtered at 6 Hz (``filter_lowpass``,
    OpenSim's ``TabOpLowPassFilter``): bare coordinate names, degrees."""
    _moco_helpers()
    import _moco_gait as mg

    from simjax.io.tables import read_table
    from simjax.tools.motion import filter_lowpass

    return filter_lowpass(read_table(mg.IK_MOT_PATH), mg.CUTOFF_HZ)


def gait_inverse_problem():
    """MocoInverse's problem for gait10dof18musc walking, as tests/_moco_gait.py poses it
    to Moco (its model edits by simjax's ``model_edits``, the IK motion filtered at 6 Hz,
    0.6-1.4 s, mesh interval 0.02 s); needs no OpenSim. **Returns:** ``(problem,
    mesh_intervals)``."""
    from simjax.optimize.moco_tools import inverse_problem

    return inverse_problem(gait_model(), gait_kinematics(), initial_time=0.6, final_time=1.4, mesh_interval=0.02)


def gait_states_reference(system):
    """``gait_kinematics`` labelled as MocoTrack's states reference
    (``TabOpUseAbsoluteStateNames``): each coordinate's column renamed
    ``<coordinate path>/value`` (still degrees, ``inDegrees=yes``)."""
    from simjax.io.tables import TimeSeriesTable

    table = gait_kinematics()
    paths = {path.rsplit("/", 1)[-1]: path for path in system.coordinate_paths}
    labels = [f"{paths[label]}/value" for label in table.labels]
    return TimeSeriesTable(table.times, table.values, labels, dict(table.metadata))


def measure_inverse(folder: str, repeat: int = 3) -> dict:
    """MocoInverse of gait10dof18musc walking (tests/_moco_gait.py: Moco's model edits,
    the IK motion filtered at 6 Hz, 0.6-1.4 s, mesh interval 0.02 s, Moco's tolerances)
    by both engines. **Returns:** a row as ``measure_one``'s."""
    _moco_helpers()
    import _moco_gait as mg

    runs = [mg.moco_inverse_gait(os.path.join(folder, f"moco_{i}")) for i in range(repeat + 1)][1:]
    best_run = min(runs, key=lambda r: r["solve_seconds"])
    settings = best_run["settings"]
    problem, n = gait_inverse_problem()
    options = sjopt.moco_options(settings["optim_convergence_tolerance"], settings["optim_constraint_tolerance"])
    # (as simjax's MocoInverse, and Moco's, detect the derivatives' sparsity)
    timed = _simjax_timed(problem, n, "hermite-simpson", options, False, repeat, sparse_derivatives=True)
    sol = timed.pop("solution")
    sj_obj, mo_obj = float(sol.objective), best_run["objective"]
    return {
        "problem": "MocoInverse, gait10dof18musc walking",
        "scheme": "hermite-simpson",
        "mesh_intervals": n,
        "tolerance": settings["optim_convergence_tolerance"],
        "constraint_tolerance": settings["optim_constraint_tolerance"],
        "hessian": settings["optim_hessian_approximation"],
        **timed,
        "simjax_iterations": int(sol.iterations),
        "simjax_objective": sj_obj,
        "simjax_status": int(sol.status),
        "simjax_per_iteration": timed["simjax"] / max(int(sol.iterations), 1),
        "moco": best_run["solve_seconds"],
        "moco_solver_timer": best_run["solver_seconds"],
        "moco_runs": [r["solve_seconds"] for r in runs],
        "moco_iterations": best_run["iterations"],
        "moco_objective": mo_obj,
        "moco_status": best_run["status"],
        "moco_per_iteration": best_run["solve_seconds"] / max(best_run["iterations"], 1),
        "ratio": timed["simjax"] / best_run["solve_seconds"],
        "objective_difference": sj_obj - mo_obj,
        "objective_relative_difference": (sj_obj - mo_obj) / abs(mo_obj),
    }


def inverse_agreement(folder: str, tolerance: float = 1e-6) -> dict:
    """MocoInverse of gait10dof18musc walking (as ``measure_inverse``) by both engines
    converged to ``tolerance`` (Moco's convergence and constraint tolerances, simjax's
    ``moco_options(tol, constraint_tol)``): do they find the same muscle activity? (At
    MocoInverse's default 1e-3 each stops early, at points apart by up to ~0.3 in
    activation.) **Returns:** both objectives and the largest activation difference over
    the grid (with the muscle and time where it is), and each muscle's RMS difference."""
    import numpy as np

    _moco_helpers()
    import _moco_gait as mg

    moco = mg.moco_inverse_gait(folder, convergence_tolerance=tolerance, constraint_tolerance=tolerance)
    problem, n = gait_inverse_problem()
    options = sjopt.moco_options(tolerance, tolerance)
    # (optimize.inverse's solve)
    sol = sjopt.solve(problem, mesh=n, options=options, interpolate_controls=False, auxiliary_derivatives_weight=0.01)
    names = [name for name in problem.state_names if name.endswith("/activation")]
    ours = np.asarray(sol.states)[:, [problem.state_names.index(name) for name in names]]
    theirs = np.stack([moco["states"][name] for name in names], axis=1)
    diff = np.abs(ours - theirs)
    i, j = np.unravel_index(diff.argmax(), diff.shape)
    return {
        "tolerance": tolerance,
        "simjax_objective": float(sol.objective),
        "simjax_status": int(sol.status),
        "moco_objective": moco["objective"],
        "moco_status": moco["status"],
        "largest_activation_difference": float(diff.max()),
        "where": (names[j], float(np.asarray(sol.time)[i])),
        "rms_by_muscle": dict(zip(names, np.sqrt((diff**2).mean(axis=0)).tolist())),
    }


def track_agreement(
    folder: str, tolerance: float = 1e-6, window: tuple = (0.6, 1.4), rerun: bool = True, objective_scale: float = 1.0
) -> dict:
    """MocoTrack of gait10dof18musc walking by both engines converged to ``tolerance``
    (Moco's convergence and constraint tolerances, simjax's ``moco_options(tol,
    constraint_tol)``; MocoTrack's own 1e-2 stops far from the optimum): the model edits
    of MocoInverse, the 6 Hz filtered IK coordinates as the states reference,
    ``initial_time, final_time = window``, everything else MocoTrack's defaults (tracking
    weight 1 on the 10 coordinate values, control effort weight 0.001, mesh interval
    0.02 s, Hermite-Simpson with interpolated midpoint controls, explicit dynamics,
    guess from the bounds). Moco: tests/_moco_gait.py's ``moco_track_gait``; simjax:
    ``optimize.track``'s problem (``track_problem``) solved as ``track`` solves it
    (``objective_scale``: its ``Options.objective_scale``), once compiling and
    (``rerun``) once again on the compiled solver.

    **Returns:** both objectives (and their terms) and their relative difference, the
    largest |coordinate value difference| at the mesh points (rotational coordinates in
    rad, translational in m, with the coordinate and time where it is) and of the speeds,
    the wall times, the iterations and the statuses."""
    import numpy as np

    _moco_helpers()
    import _moco_gait as mg

    from simjax.optimize import files
    from simjax.optimize.moco_tools import track_problem

    moco = mg.moco_track_gait(
        folder, time=window, optim_convergence_tolerance=tolerance, optim_constraint_tolerance=tolerance
    )
    system = gait_model()
    problem, n = track_problem(
        system, gait_states_reference(system), initial_time=window[0], final_time=window[1], mesh_interval=0.02
    )
    options = sjopt.moco_options(tolerance, tolerance, objective_scale=objective_scale)
    # (optimize.track's solve; the second call reuses the first's compiled solver)
    run = lambda: sjopt.solve(problem, mesh=n, scheme="hermite-simpson", options=options, dynamics_mode="explicit")  # noqa: E731
    t = time.perf_counter()
    sol = jax.block_until_ready(run())
    first_s = time.perf_counter() - t
    run_s = None
    if rerun:
        t = time.perf_counter()
        sol = jax.block_until_ready(run())
        run_s = time.perf_counter() - t

    # at the mesh points (every other Hermite-Simpson grid point), on Moco's mesh times
    mesh_t = np.asarray(moco["time"])[moco["mesh_indices"]]
    ours_t = np.asarray(sol.time)

    def at_mesh(name):
        ours = np.interp(mesh_t, ours_t, np.asarray(sol.states)[:, problem.state_names.index(name)])
        return ours - np.asarray(moco["states"][name])[moco["mesh_indices"]]

    tree = system.topology.tree
    rotational = {p: str(tree.coordinates[p].motion_type).lower().startswith("rot") for p in system.coordinate_paths}
    largest = {}
    for kind in ("value", "speed"):
        for rot in (True, False):
            paths = [p for p in system.coordinate_paths if rotational[p] == rot]
            rows = [(float(np.abs(at_mesh(f"{p}/{kind}")).max()), p) for p in paths]
            if rows:
                d, p = max(rows)
                i = int(np.abs(at_mesh(f"{p}/{kind}")).argmax())
                largest[(kind, rot)] = (d, p, float(mesh_t[i]))
    sj_obj, mo_obj = float(sol.objective), moco["objective"]
    same_grid = ours_t.shape == np.asarray(moco["time"]).shape and np.allclose(ours_t, moco["time"], atol=1e-12)
    return {
        "tolerance": tolerance,
        "objective_scale": objective_scale,
        "window": tuple(window),
        "mesh_intervals": n,
        "same_grid": bool(same_grid),
        "simjax_objective": sj_obj,
        "moco_objective": mo_obj,
        "objective_relative_difference": (sj_obj - mo_obj) / abs(mo_obj),
        "simjax_objective_terms": files.objective_terms(sol, problem),
        "moco_objective_terms": moco["objective_terms"],
        "max_coordinate_value_difference_rad": largest[("value", True)],
        "max_coordinate_value_difference_m": largest.get(("value", False)),
        "max_coordinate_speed_difference_rad_s": largest[("speed", True)],
        "max_coordinate_speed_difference_m_s": largest.get(("speed", False)),
        "simjax_status": f"{int(sol.status)} ({sjopt.STATUS[int(sol.status)]})",
        "moco_status": moco["status"],
        "simjax_iterations": int(sol.iterations),
        "moco_iterations": moco["iterations"],
        "simjax_seconds_first_call_with_compile": first_s,
        "simjax_seconds_compiled": run_s,
        "moco_solve_seconds": moco["solve_seconds"],
    }


def measure_one(name: str, moco_fn: str, scheme: str, mesh: int, folder: str, repeat: int = 3) -> dict:
    """One problem on one mesh, both engines. **Returns:** a row (seconds unless named)."""
    moco = _moco_helpers()
    # Moco: the first solve writes the model file and warms up; then best of `repeat`
    ref = getattr(moco, moco_fn)(folder, transcription=scheme, num_mesh_intervals=mesh)
    settings = ref["settings"]
    study = moco.study_from_problem(
        ref["model_path"],
        ref["problem"],
        transcription=scheme,
        num_mesh_intervals=mesh,
        convergence_tolerance=settings["optim_convergence_tolerance"],
        constraint_tolerance=settings["optim_constraint_tolerance"],
    )
    runs = [moco.solve(study) for _ in range(repeat)]
    best_run = min(runs, key=lambda r: r["solve_seconds"])

    # simjax, on the same file
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = sj.load_osim(ref["model_path"]).build()
    problem = moco.simjax_problem(ref["problem"], system)
    options = sjopt.moco_options(settings["optim_convergence_tolerance"], settings["optim_constraint_tolerance"])
    timed = _simjax_timed(problem, mesh, scheme, options, True, repeat)
    sol, sj_s = timed.pop("solution"), timed["simjax"]

    sj_iter, mo_iter = int(sol.iterations), best_run["iterations"]
    sj_obj, mo_obj = float(sol.objective), best_run["objective"]
    return {
        "problem": name,
        "scheme": scheme,
        "mesh_intervals": mesh,
        "tolerance": settings["optim_convergence_tolerance"],
        "constraint_tolerance": settings["optim_constraint_tolerance"],
        "hessian": settings["optim_hessian_approximation"],
        **timed,
        "simjax_iterations": sj_iter,
        "simjax_objective": sj_obj,
        "simjax_status": int(sol.status),
        "simjax_per_iteration": sj_s / max(sj_iter, 1),
        "moco": best_run["solve_seconds"],
        "moco_solver_timer": best_run["solver_seconds"],
        "moco_runs": [r["solve_seconds"] for r in runs],
        "moco_iterations": mo_iter,
        "moco_objective": mo_obj,
        "moco_status": best_run["status"],
        "moco_per_iteration": best_run["solve_seconds"] / max(mo_iter, 1),
        "ratio": sj_s / best_run["solve_seconds"],
        "objective_difference": sj_obj - mo_obj,
        "objective_relative_difference": (sj_obj - mo_obj) / abs(mo_obj) if mo_obj else float("nan"),
    }


def measure(meshes=MESHES, repeat: int = 3, inverse: bool = True) -> list[dict]:
    """Every problem on every mesh. **Returns:** a row per (problem, mesh), each also
    with ``cores`` (this process's CPU affinity) and ``load_average`` (the machine's
    1-minute load before and after: above the number of CPUs, the timings are
    contended)."""
    _moco_helpers()._opensim()  # (OpenSim's log off before anything prints)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn, scheme in PROBLEMS:
            for mesh in meshes:
                folder = os.path.join(tmp, f"{fn}_{mesh}")
                os.makedirs(folder)
                load = os.getloadavg()[0]
                row = measure_one(name, fn, scheme, int(mesh), folder, repeat)
                row.update(cores=cores, cpus=os.cpu_count(), load_average=(load, os.getloadavg()[0]))
                rows.append(row)
        if inverse:
            load = os.getloadavg()[0]
            row = measure_inverse(tmp, repeat)
            row.update(cores=cores, cpus=os.cpu_count(), load_average=(load, os.getloadavg()[0]))
            rows.append(row)
    return rows


def scaling(rows) -> list[dict]:
    """Per problem, time per iteration on its largest mesh over that on its smallest,
    for each engine, next to the ratio of the meshes."""
    out = []
    for name, _, _ in PROBLEMS:
        mine = sorted((r for r in rows if r["problem"] == name), key=lambda r: r["mesh_intervals"])
        if len(mine) < 2:
            continue
        a, b = mine[0], mine[-1]
        out.append(
            {
                "problem": name,
                "meshes": (a["mesh_intervals"], b["mesh_intervals"]),
                "mesh_ratio": b["mesh_intervals"] / a["mesh_intervals"],
                "simjax": b["simjax_per_iteration"] / a["simjax_per_iteration"],
                "moco": b["moco_per_iteration"] / a["moco_per_iteration"],
            }
        )
    return out


def markdown(rows) -> str:
    """The rows as Markdown: a table, the growth with the mesh, and a note where the
    machine was busy."""
    lines = [
        "| problem | scheme, intervals | simjax compile (trace + XLA) | simjax run | Moco `study.solve()` "
        "| ratio | iterations (simjax / Moco) | objective simjax | objective Moco | difference |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        status = "" if r["simjax_status"] == 0 else f" (status {r['simjax_status']})"
        lines.append(
            f"| {r['problem']} | {r['scheme']}, {r['mesh_intervals']} | "
            f"{r['simjax_compile']:.1f} s ({r['simjax_trace_lower']:.1f} + {r['simjax_xla_compile']:.1f}) | "
            f"{r['simjax'] * 1e3:.0f} ms{status} | {r['moco'] * 1e3:.0f} ms | {r['ratio']:.2f} | "
            f"{r['simjax_iterations']} / {r['moco_iterations']} | {r['simjax_objective']:.10g} | "
            f"{r['moco_objective']:.10g} | {r['objective_difference']:.1e} "
            f"({r['objective_relative_difference']:.1e} rel.) |"
        )
    for s in scaling(rows):
        lines.append(
            f"\n{s['problem']}: time per iteration at {s['meshes'][1]} intervals / at {s['meshes'][0]} = "
            f"{s['simjax']:.1f} (simjax), {s['moco']:.1f} (Moco) for {s['mesh_ratio']:.0f}x the intervals."
        )
    if rows:
        r = rows[0]
        busy = max(max(x["load_average"]) for x in rows)
        lines.append(
            f"\nTolerances {r['tolerance']:g} (constraints {r['constraint_tolerance']:g}); Moco's Hessian "
            f"{r['hessian']}; best of 3 after a warm-up run; {r['cores']} of {r['cpus']} CPUs "
            f"(pin with taskset -c 0); 1-minute load average up to {busy:.1f}"
            + (": the machine was busy, timings contended." if busy > r["cpus"] + 0.5 else ".")
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshes", default=",".join(map(str, MESHES)), help="numbers of mesh intervals")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per engine (best taken)")
    ap.add_argument("--no-inverse", action="store_true", help="skip MocoInverse of the gait")
    ap.add_argument(
        "--inverse-agreement",
        type=float,
        metavar="TOL",
        default=None,
        help="instead: MocoInverse of the gait by both engines converged to TOL, their activations compared",
    )
    ap.add_argument(
        "--track-agreement",
        type=float,
        metavar="TOL",
        default=None,
        help="instead: MocoTrack of the gait by both engines converged to TOL, objectives and states compared",
    )
    ap.add_argument(
        "--track-window",
        default="0.6,1.4",
        metavar="T0,T1",
        help="the time window (s) of --track-agreement",
    )
    args = ap.parse_args(argv)
    if args.track_agreement is not None:
        window = tuple(float(x) for x in args.track_window.split(","))
        with tempfile.TemporaryDirectory() as folder:
            for key, value in track_agreement(folder, args.track_agreement, window, args.repeat > 0).items():
                print(f"{key}: {value}")
        return
    if args.inverse_agreement is not None:
        with tempfile.TemporaryDirectory() as folder:
            for key, value in inverse_agreement(folder, args.inverse_agreement).items():
                print(f"{key}: {value}")
        return
    print(markdown(measure([int(m) for m in args.meshes.split(",")], args.repeat, not args.no_inverse)))


if __name__ == "__main__":
    main()
