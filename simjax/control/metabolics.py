"""Muscle metabolic energy rate: OpenSim's ``Umberger2010MuscleMetabolicsProbe``.

The probe's inputs are the whole-body metabolic power (W) and, unless
``report_total_metabolics_only``, the basal rate and each muscle's rate:
``[TOTAL, BASAL, muscle_1, ..., muscle_n]`` (labels ``<probe>_TOTAL``,
``<probe>_BASAL``, ``<probe>_<muscle>``). With OpenSim 4.6's defaults (Umberger et al.
2003, 2010; Bhargava et al. 2004; Uchida et al. 2016), for a muscle of mass ``m``
(kg), and rates in W/kg before the final scaling by ``m``:

- excitation ``u``, activation ``a`` and active fiber force are scaled by
  ``muscle_effort_scaling_factor``; ``A = u`` if ``u > a`` else ``(u + a) / 2``;
- slow-twitch ratio ``r``: the property, or with the Bhargava recruitment model
  ``u_s / (u_s + u_f)``, ``u_s = r sin(pi u / 2)``, ``u_f = (1 - r)(1 - cos(pi u /
  2))`` (1 when ``u = 0``);
- activation and maintenance ``AM = S A^0.6 (128 (1 - r) + 25)`` (times ``0.4 +
  0.6 F_iso`` above optimal fiber length; ``S`` = ``aerobic_factor``, ``F_iso`` the
  active force-length multiplier);
- shortening, with ``v_n = v / l_opt`` and ``v_max`` = ``max_contraction_velocity``
  (optimal fiber lengths per second): for ``v_n <= 0``, ``S A^2 (min(-a_s v_n,
  100) r - a_f v_n (1 - r))`` with ``a_f = 153 / v_max`` and ``a_s = 100 / (v_max /
  2.5)``; for lengthening ``S A (4.0 or 0.3) a_s v_n`` (0.3 without
  ``include_negative_mechanical_work``); times ``F_iso`` above optimal fiber length;
- mechanical work ``W = -max(F_active, 0) v / m`` (0 while lengthening without
  ``include_negative_mechanical_work``);
- ``forbid_negative_total_power``: the shortening rate is raised so that ``AM + S +
  W >= 0``; ``enforce_minimum_heat_rate_per_muscle``: ``AM + S >= 1`` W/kg (when
  both heat rates are on);
- ``Edot = m (AM + S + W)`` of the rates that are on; the basal rate is
  ``basal_coefficient * (total body mass) ** basal_exponent``.

The muscle mass is ``provided_muscle_mass``, or ``max_isometric_force /
specific_tension * density * optimal_fiber_length``. All muscles of all probes of
the class are one vectorized computation (no loop over muscles in traced code):
every (probe, muscle) pair is one entry, per-probe settings are gathered onto the
entries and the totals are a ``segment_sum`` over probes.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..component import ModelError, _as_property, flag, prop
from ..muscles.muscle import Muscle
from .probes import Probe

__all__ = ["Umberger2010MuscleMetabolicsProbe", "Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter"]

_PROBE_FLAGS = (
    "activation_maintenance_rate_on",
    "shortening_rate_on",
    "basal_rate_on",
    "mechanical_work_rate_on",
    "enforce_minimum_heat_rate_per_muscle",
    "use_Bhargava_recruitment_model",
    "include_negative_mechanical_work",
    "forbid_negative_total_power",
)
_PROBE_PROPS = ("aerobic_factor", "basal_coefficient", "basal_exponent", "muscle_effort_scaling_factor", "gain")
_MUSCLE_PROPS = ("specific_tension", "density", "ratio_slow_twitch_fibers", "provided_muscle_mass")
#: what the probe reads from each muscle's evaluation
_MUSCLE_OUTPUTS = (
    "activation",
    "excitation",
    "active_fiber_force",
    "normalized_fiber_length",
    "fiber_velocity",
    "active_force_length_multiplier",
)


class Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter(eqx.Module):  # noqa: N801 (OpenSim's name)
    """The metabolic parameters of one muscle of an ``Umberger2010MuscleMetabolicsProbe``
    (OpenSim ``Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter``).

    **Fields:** ``name``: the name of a muscle of the model's forceset;
    ``specific_tension`` (Pa, default 0.25e6); ``density`` (kg/m^3, default 1059.7);
    ``ratio_slow_twitch_fibers`` (in [0, 1], default 0.5);
    ``use_provided_muscle_mass`` (static); ``provided_muscle_mass`` (kg, NaN when not
    given).
    """

    name: str = eqx.field(static=True)
    specific_tension: np.ndarray = eqx.field(default=0.25e6, converter=_as_property)
    density: np.ndarray = eqx.field(default=1059.7, converter=_as_property)
    ratio_slow_twitch_fibers: np.ndarray = eqx.field(default=0.5, converter=_as_property)
    use_provided_muscle_mass: bool = eqx.field(static=True, default=False)
    provided_muscle_mass: np.ndarray = eqx.field(default=float("nan"), converter=_as_property)


MetabolicMuscleParameter = Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter


def _concrete(x) -> float | None:
    return float(np.asarray(x)) if isinstance(x, (np.ndarray, float, int)) else None


class Umberger2010MuscleMetabolicsProbe(Probe):
    """Metabolic power of a set of muscles (OpenSim ``Umberger2010MuscleMetabolicsProbe``;
    the model is in the module docstring).

    **Fields** (OpenSim's properties, defaults as OpenSim 4.6): the ``Probe`` fields;
    ``activation_maintenance_rate_on``, ``shortening_rate_on``, ``basal_rate_on``,
    ``mechanical_work_rate_on``, ``enforce_minimum_heat_rate_per_muscle``,
    ``use_Bhargava_recruitment_model``, ``include_negative_mechanical_work``,
    ``forbid_negative_total_power`` (all true), ``report_total_metabolics_only``
    (true) — static; ``aerobic_factor`` (1.5), ``basal_coefficient`` (1.2, W/kg^e),
    ``basal_exponent`` (``e``, 1.0), ``muscle_effort_scaling_factor`` (1.0);
    ``muscle_parameters``: a tuple of
    ``Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameter`` (OpenSim's
    ``Umberger2010MuscleMetabolicsProbe_MetabolicMuscleParameterSet``).

    **Output:** ``probe_outputs`` (W; J with ``'integrate'``).

    ``Umberger2010MuscleMetabolicsProbe("metabolics").add_muscle("soleus_r", 0.8)``
    """

    activation_maintenance_rate_on: bool = flag(
        True, doc="Whether the activation and maintenance heat rate is computed."
    )
    shortening_rate_on: bool = flag(True, doc="Whether the shortening heat rate is computed.")
    basal_rate_on: bool = flag(True, doc="Whether the basal heat rate is computed.")
    mechanical_work_rate_on: bool = flag(True, doc="Whether the mechanical work rate is computed.")
    enforce_minimum_heat_rate_per_muscle: bool = flag(
        True, doc="Whether each muscle's heat rate is clamped to at least 1.0 W/kg."
    )
    aerobic_factor: np.ndarray = prop(1.5, doc="Aerobic scale factor S (1.0 anaerobic, 1.5 aerobic).")
    basal_coefficient: np.ndarray = prop(1.2, doc="Basal metabolic coefficient (W/kg^basal_exponent).")
    basal_exponent: np.ndarray = prop(1.0, doc="Basal metabolic exponent.")
    muscle_effort_scaling_factor: np.ndarray = prop(
        1.0, doc="Factor scaling the excitations, activations and active fiber forces the probe uses."
    )
    use_Bhargava_recruitment_model: bool = flag(
        True, doc="Whether the slow-twitch ratio follows the recruitment model of Bhargava et al. (2004)."
    )
    include_negative_mechanical_work: bool = flag(
        True, doc="Whether negative mechanical work is included (and alpha_L uses 4.0 rather than 0.3)."
    )
    forbid_negative_total_power: bool = flag(True, doc="Whether each muscle's total power is kept non-negative.")
    report_total_metabolics_only: bool = flag(
        True, doc="Whether only the total is reported (else the total, the basal rate and each muscle's rate)."
    )
    muscle_parameters: tuple = ()

    def __init__(
        self,
        name: str,
        activation_maintenance_rate_on: bool = True,
        shortening_rate_on: bool = True,
        basal_rate_on: bool = True,
        mechanical_work_rate_on: bool = True,
        *,
        muscle_parameters: tuple = (),
        enabled: bool = True,
        probe_operation: str = "value",
        initial_conditions_for_integration=(),
        gain=1.0,
        enforce_minimum_heat_rate_per_muscle: bool = True,
        aerobic_factor=1.5,
        basal_coefficient=1.2,
        basal_exponent=1.0,
        muscle_effort_scaling_factor=1.0,
        use_Bhargava_recruitment_model: bool = True,
        include_negative_mechanical_work: bool = True,
        forbid_negative_total_power: bool = True,
        report_total_metabolics_only: bool = True,
        components: tuple = (),
    ):
        self.name = name
        self.enabled = enabled
        self.probe_operation = probe_operation
        self.initial_conditions_for_integration = initial_conditions_for_integration
        self.gain = gain
        self.activation_maintenance_rate_on = activation_maintenance_rate_on
        self.shortening_rate_on = shortening_rate_on
        self.basal_rate_on = basal_rate_on
        self.mechanical_work_rate_on = mechanical_work_rate_on
        self.enforce_minimum_heat_rate_per_muscle = enforce_minimum_heat_rate_per_muscle
        self.aerobic_factor = aerobic_factor
        self.basal_coefficient = basal_coefficient
        self.basal_exponent = basal_exponent
        self.muscle_effort_scaling_factor = muscle_effort_scaling_factor
        self.use_Bhargava_recruitment_model = use_Bhargava_recruitment_model
        self.include_negative_mechanical_work = include_negative_mechanical_work
        self.forbid_negative_total_power = forbid_negative_total_power
        self.report_total_metabolics_only = report_total_metabolics_only
        self.muscle_parameters = tuple(muscle_parameters)
        self.components = components

    def __check_init__(self):
        for p in self.muscle_parameters:
            if not isinstance(p, MetabolicMuscleParameter):
                raise ModelError(
                    self.name, f"entries must be {MetabolicMuscleParameter.__name__}", prop="muscle_parameters", value=p
                )

    # -- editing ---------------------------------------------------------------------------

    def add_muscle(
        self, muscle: str, ratio_slow_twitch_fibers: float = 0.5, muscle_mass: float | None = None, **parameters
    ) -> Umberger2010MuscleMetabolicsProbe:
        """A copy that also probes the muscle called ``muscle`` (OpenSim ``addMuscle``).

        **Arguments:** ``ratio_slow_twitch_fibers``; ``muscle_mass`` (kg): use this mass
        rather than the one computed from the muscle; ``parameters``: other fields of
        the parameter entry (``specific_tension``, ``density``).
        """
        if any(p.name == muscle for p in self.muscle_parameters):
            raise ModelError(self.name, f"already probes the muscle {muscle!r}", prop="muscle_parameters")
        if muscle_mass is not None:
            parameters.update(use_provided_muscle_mass=True, provided_muscle_mass=muscle_mass)
        entry = MetabolicMuscleParameter(muscle, ratio_slow_twitch_fibers=ratio_slow_twitch_fibers, **parameters)
        return self.replace(muscle_parameters=self.muscle_parameters + (entry,))

    def remove_muscle(self, muscle: str) -> Umberger2010MuscleMetabolicsProbe:
        """A copy that no longer probes ``muscle`` (OpenSim ``removeMuscle``)."""
        return self.replace(muscle_parameters=tuple(p for p in self.muscle_parameters if p.name != muscle))

    def muscle_masses(self, model) -> dict:
        """The mass (kg) used for each probed muscle (OpenSim ``getMuscleMass``):
        ``{muscle name: mass}``."""
        out = {}
        for p in self.muscle_parameters:
            if p.use_provided_muscle_mass:
                out[p.name] = p.provided_muscle_mass
            else:
                m = model.find(f"/forceset/{p.name}")
                out[p.name] = (m.max_isometric_force / p.specific_tension) * p.density * m.optimal_fiber_length
        return out

    # -- Probe interface -------------------------------------------------------------------

    def probe_output_labels(self) -> tuple[str, ...]:
        """``<name>_TOTAL``, then (unless ``report_total_metabolics_only``)
        ``<name>_BASAL`` and ``<name>_<muscle>`` per muscle."""
        labels = (f"{self.name}_TOTAL",)
        if self.report_total_metabolics_only:
            return labels
        return labels + (f"{self.name}_BASAL",) + tuple(f"{self.name}_{p.name}" for p in self.muscle_parameters)

    def validate(self, path: str) -> None:
        """OpenSim's checks of the parameter entries (OpenSim disables the probe with a
        warning; simjax raises ``ModelError``): provided masses positive, specific
        tensions and densities positive, slow-twitch ratios in [0, 1]; no muscle twice."""
        super().validate(path)
        seen = set()
        for p in self.muscle_parameters:
            where = f"{path} (muscle {p.name!r})"
            if p.name in seen:
                raise ModelError(path, f"muscle {p.name!r} has two parameter entries", prop="muscle_parameters")
            seen.add(p.name)
            checks = [("ratio_slow_twitch_fibers", lambda v: 0.0 <= v <= 1.0, "must be between 0 and 1")]
            if p.use_provided_muscle_mass:
                checks.append(("provided_muscle_mass", lambda v: v > 0.0, "must be a positive number (kg)"))
            else:
                checks += [
                    ("specific_tension", lambda v: v > 0.0, "must be a positive number (N/m^2)"),
                    ("density", lambda v: v > 0.0, "must be a positive number (kg/m^3)"),
                ]
            for name, ok, msg in checks:
                v = _concrete(getattr(p, name))
                if v is not None and not ok(v):  # NaN fails every check
                    raise ModelError(where, msg, prop=name, value=v)

    @classmethod
    def compile_group(cls, build, paths) -> dict:
        """Static data: one entry per (enabled probe, muscle) with its probe
        (``probe``), muscle path (``muscles``) and mass rule (``provided``);
        per-probe flags; where totals, basal rates and muscle rates go in the flat
        input vector."""
        s = super().compile_group(build, paths)
        comps = [build.find(p) for p in paths]
        probe, muscles, provided, slot = [], [], [], []
        total_rows, basal_rows, basal_probes = [], [], []
        for j, (path, c) in enumerate(zip(paths, comps)):
            if not c.enabled:
                continue
            off = int(s["offsets"][j])
            total_rows.append(off)
            if not c.report_total_metabolics_only:
                basal_rows.append(off + 1)
                basal_probes.append(j)
            for i, p in enumerate(c.muscle_parameters):
                mpath = f"/forceset/{p.name}"
                if not isinstance(_find(build, mpath), Muscle):
                    raise ModelError(
                        path,
                        f"muscle {p.name!r} is not a muscle of the model's forceset (OpenSim disables the probe)",
                        prop="muscle_parameters",
                        value=p.name,
                    )
                probe.append(j)
                muscles.append(mpath)
                provided.append(p.use_provided_muscle_mass)
                slot.append(off + 2 + i if not c.report_total_metabolics_only else -1)
        slot = np.asarray(slot, np.int64)
        s.update(
            probe=np.asarray(probe, np.int64),
            muscles=tuple(muscles),
            provided=np.asarray(provided, bool),
            entry_rows=slot[slot >= 0],
            entry_pick=np.flatnonzero(slot >= 0),
            total_rows=np.asarray(total_rows, np.int64),
            total_probes=np.asarray([j for j, c in enumerate(comps) if c.enabled], np.int64),
            basal_rows=np.asarray(basal_rows, np.int64),
            basal_probes=np.asarray(basal_probes, np.int64),
            **{f: np.asarray([getattr(c, f) for c in comps], bool) for f in _PROBE_FLAGS},
        )
        return s

    @classmethod
    def group_params(cls, model, group) -> dict:
        """Per-probe properties ``(k,)`` and per-entry muscle parameters ``(E,)``."""
        dtype = jnp.result_type(float)
        comps = [model.find(p) for p in group.paths]
        out = {f: jnp.stack([jnp.asarray(getattr(c, f), dtype) for c in comps]) for f in _PROBE_PROPS}
        entries = [p for c in comps if c.enabled for p in c.muscle_parameters]
        for f in _MUSCLE_PROPS:
            values = [jnp.asarray(getattr(p, f), dtype) for p in entries]
            out[f] = jnp.stack(values) if values else jnp.zeros(0, dtype)
        return out

    @classmethod
    def group_probe_inputs(cls, group, params, ctx):
        """``[TOTAL, (BASAL, muscle rates)]`` of every member, concatenated (W)."""
        s = group.static
        dtype = ctx.state.t.dtype
        n = int(s["offsets"][-1])
        k = len(group.paths)
        mus = _muscle_quantities(ctx, s["muscles"]) if len(s["muscles"]) else None
        basal = jnp.where(
            s["basal_rate_on"],
            params["basal_coefficient"] * jnp.power(jnp.sum(ctx.params["mass"]), params["basal_exponent"]),
            0.0,
        )
        total = basal
        edot = jnp.zeros(0, dtype)
        if mus is not None:
            edot = umberger2010_rates(s, params, mus)
            total = total + jax.ops.segment_sum(edot, s["probe"], num_segments=k)
        inputs = jnp.zeros(n, dtype)
        inputs = inputs.at[s["total_rows"]].set(total[s["total_probes"]])
        inputs = inputs.at[s["basal_rows"]].set(basal[s["basal_probes"]])
        return inputs.at[s["entry_rows"]].set(edot[s["entry_pick"]])


def _find(build, path):
    try:
        return build.find(path)
    except KeyError:
        return None


def _muscle_quantities(ctx, muscle_paths: tuple) -> dict:
    """What the probe reads from the muscles, gathered from their groups' evaluations
    (one per muscle class, shared with the force and state-derivative roles).

    **Arguments:** ``ctx``: the evaluation context; ``muscle_paths``: one muscle path
    per entry (a muscle may appear in several probes).

    **Returns:** ``{name: (E,)}`` for ``_MUSCLE_OUTPUTS`` (activation and excitation in
    [0, 1], active fiber force in N, normalized fiber length, fiber velocity in m/s,
    active force-length multiplier) and the properties ``max_isometric_force`` (N),
    ``optimal_fiber_length`` (m), ``max_contraction_velocity`` (optimal fiber lengths
    per second).
    """
    groups = [g for g in ctx.topology.role_groups("forces") if issubclass(g.cls, Muscle)]
    order = {p: i for i, p in enumerate(p for g in groups for p in g.paths)}
    pick = np.asarray([order[p] for p in muscle_paths], np.int64)  # static, built at trace time
    out = {}
    results = [g.cls.results(g, ctx) for g in groups]
    gparams = [ctx.group_params(g) for g in groups]
    for name in _MUSCLE_OUTPUTS:
        out[name] = jnp.concatenate([jnp.reshape(r[name], (-1,)) for r in results])[pick]
    for name in ("max_isometric_force", "optimal_fiber_length", "max_contraction_velocity"):
        out[name] = jnp.concatenate([jnp.reshape(p[name], (-1,)) for p in gparams])[pick]
    return out


def umberger2010_rates(static: dict, params: dict, mus: dict):
    """Each entry's metabolic power ``Edot`` (W) (OpenSim
    ``Umberger2010MuscleMetabolicsProbe::computeProbeInputs``, per muscle).

    **Arguments:** ``static``: the group's static data (``probe``, ``provided`` and the
    per-probe flags); ``params``: per-probe properties ``(k,)`` and per-entry muscle
    parameters ``(E,)``; ``mus``: the muscles' quantities ``(E,)``
    (``_muscle_quantities``).

    **Returns:** ``(E,)``.
    """
    pj = static["probe"]
    flag_ = {f: static[f][pj] for f in _PROBE_FLAGS}
    S = params["aerobic_factor"][pj]
    effort = params["muscle_effort_scaling_factor"][pj]
    am_on, sh_on = flag_["activation_maintenance_rate_on"], flag_["shortening_rate_on"]
    work_on, forbid = flag_["mechanical_work_rate_on"], flag_["forbid_negative_total_power"]
    neg_work = flag_["include_negative_mechanical_work"]

    # muscle mass (kg)
    computed = (
        (mus["max_isometric_force"] / params["specific_tension"]) * params["density"] * mus["optimal_fiber_length"]
    )
    mass = jnp.where(static["provided"], params["provided_muscle_mass"], computed)

    activation = effort * mus["activation"]
    excitation = effort * mus["excitation"]
    active_force = effort * mus["active_fiber_force"]
    lnorm = mus["normalized_fiber_length"]
    v = mus["fiber_velocity"]
    vnorm = v / mus["optimal_fiber_length"]  # Umberger's v/l_opt, not v/v_max
    f_iso = mus["active_force_length_multiplier"]
    A = jnp.where(excitation > activation, excitation, 0.5 * (excitation + activation))

    # slow-twitch ratio (Bhargava et al. 2004 recruitment)
    r0 = params["ratio_slow_twitch_fibers"]
    half_pi_u = 0.5 * np.pi * excitation
    u_slow = r0 * jnp.sin(half_pi_u)
    u_fast = (1.0 - r0) * (1.0 - jnp.cos(half_pi_u))
    zero_u = excitation == 0
    recruited = jnp.where(zero_u, 1.0, u_slow / jnp.where(zero_u, 1.0, u_slow + u_fast))
    r = jnp.where(flag_["use_Bhargava_recruitment_model"], recruited, r0)

    # activation and maintenance heat rate (W/kg)
    am_unscaled = 128.0 * (1.0 - r) + 25.0
    am = S * _pow06(A) * jnp.where(lnorm <= 1.0, am_unscaled, 0.4 * am_unscaled + 0.6 * am_unscaled * f_iso)
    am = jnp.where(forbid | am_on, am, 0.0)

    # shortening heat rate (W/kg)
    vmax = mus["max_contraction_velocity"]
    alpha_fast = 153.0 / vmax
    alpha_slow = 100.0 / (vmax / 2.5)
    slow = jnp.minimum(-alpha_slow * vnorm, 100.0)
    fast = alpha_fast * vnorm * (1.0 - r)
    concentric = S * (A * A) * (slow * r - fast)
    eccentric = S * A * (jnp.where(neg_work, 4.0, 0.3) * alpha_slow * vnorm)
    sdot = jnp.where(vnorm <= 0.0, concentric, eccentric)
    sdot = jnp.where(lnorm > 1.0, sdot * f_iso, sdot)
    sdot = jnp.where(forbid | sh_on, sdot, 0.0)

    # mechanical work rate (W/kg)
    active_force = jnp.where(active_force < 0.0, 0.0, active_force)
    wdot = jnp.where(neg_work | (v <= 0.0), -active_force * v, 0.0) / mass
    wdot = jnp.where(forbid | work_on, wdot, 0.0)

    # keep the total power non-negative by raising the shortening heat rate
    before = am + sdot + wdot
    sdot = jnp.where(forbid & (before < 0.0), sdot - before, sdot)

    # total heat rate at least 1.0 W/kg (Umberger 2003, p. 104)
    heat = am + sdot
    heat = jnp.where(flag_["enforce_minimum_heat_rate_per_muscle"] & (heat < 1.0) & am_on & sh_on, 1.0, heat)
    edot = jnp.where(am_on & sh_on, heat, jnp.where(am_on, am, 0.0) + jnp.where(sh_on, sdot, 0.0))
    edot = edot + jnp.where(work_on, wdot, 0.0)
    return edot * mass


def _pow06(A):
    """``A ** 0.6`` with a finite derivative at 0 (NaN for ``A < 0``, as ``std::pow``)."""
    pos = A > 0.0
    return jnp.where(pos, jnp.where(pos, A, 1.0) ** 0.6, jnp.where(A == 0.0, 0.0, jnp.nan))
