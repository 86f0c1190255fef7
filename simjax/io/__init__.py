"""Input and output: data tables and OpenSim file formats.

- ``simjax.io.tables``: ``TimeSeriesTable`` (OpenSim's ``TimeSeriesTable`` and
  ``TimeSeriesTableVec3`` in numpy) and the ``.sto``/``.mot``/``.trc``/``.csv``
  file adapters behind ``read_table`` and ``write_table``.

Submodules are imported on demand, so importing this package stays cheap.
"""
