"""The ``simjax`` command line.

Subcommands:

- ``simjax info MODEL``: the model's components, coordinates, actuators and state
  variables (as ``opensim-cmd info``), and any content skipped on loading;
- ``simjax validate MODEL``: load the model in simjax and in OpenSim and compare,
  at random valid states, every quantity both compute (``simjax.io.osim.validate``),
  printing the worst errors per quantity; exit status 1 if any exceeds its tolerance.

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


def resolve_model_path(model: str) -> str:
    """An existing file path, or the file of a shipped model of that name.

    **Raises:** ``FileNotFoundError`` naming both possibilities.
    """
    if os.path.isfile(model):
        return model
    from . import models

    try:
        return models.path(model)
    except KeyError:
        raise FileNotFoundError(f"no file {model!r}, and no shipped model of that name "
                                f"(shipped: {', '.join(models.names())})") from None


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
        out.append(f"  {p}  {tree.coordinates[p].motion_type}  default {_fmt(c.default_value)}  range "
                   f"[{_fmt(c.range[0])}, {_fmt(c.range[1])}]" + (f"  ({', '.join(flags)})" if flags else ""))
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
    parser.add_argument("--strict", action="store_true",
                        help="fail on content simjax does not model yet (default: skip and list it)")


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

    path = resolve_model_path(args.model)
    unknown = [c for c in (args.check or []) if c not in CHECKS]
    if unknown:
        print(f"unknown check(s) {', '.join(unknown)}; available: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    results = validate(path, n_states=args.states, seed=args.seed, checks=args.check)
    print(f"{path}: simjax vs OpenSim {opensim.GetVersion()} at {args.states} random states")
    print(format_results(results))
    return 0 if all(r.passed for r in results) else 1


def _configure_validate(parser: argparse.ArgumentParser) -> None:
    _model_argument(parser)
    parser.add_argument("-n", "--states", type=int, default=50, help="number of random states (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--check", action="append", help="run only this check (repeatable)")


register_subcommand("info", "list a model's components, coordinates, actuators and state variables",
                    _configure_info, _info)
register_subcommand("validate", "compare simjax with OpenSim on a model at random states",
                    _configure_validate, _validate)


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
