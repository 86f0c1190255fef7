"""Input and output: data tables and OpenSim file formats.

- ``simjax.io.tables``: ``TimeSeriesTable`` (OpenSim's ``TimeSeriesTable`` and
  ``TimeSeriesTableVec3`` in numpy) and the ``.sto``/``.mot``/``.trc``/``.csv``
  file adapters behind ``read_table`` and ``write_table``.
- ``simjax.io.osim``: OpenSim 4 ``.osim`` model files (``load_osim``,
  ``save_osim``), the registry that maps OpenSim classes onto simjax classes, and
  ``validate`` (simjax against OpenSim on the same file).
- ``simjax.io.states``: states files (``.sto`` with a column per state variable)
  and coordinate motions (IK ``.mot``): initial states and prescribed motion.

Submodules are imported on demand, so importing this package stays cheap.
"""
