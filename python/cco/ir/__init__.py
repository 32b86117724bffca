"""CCO IR: the cco device API for kernels written in Python DSLs.

- ``cco.ir.device_functions``: the scalar ABI table of the device bitcode,
  the single source of its C wrappers and of the bindings;
- ``cco.ir.wrappers``: generates the wrappers' C source from the table;
- ``cco.ir.bitcode``: finds (or builds) ``libcco_device_sm<arch>.bc``;
- ``cco.ir.triton``: the Triton bindings, ``from cco.ir.triton import cco``.

Importing ``cco.ir`` imports neither Triton nor libcco.
"""
