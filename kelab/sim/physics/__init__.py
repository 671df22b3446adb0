"""The physics room: a compiled Scene stepped in pymunk, behind one Backend protocol.

Between the scene description (:mod:`kelab.sim.scene`, below) and the runtime (the World
and its helpers in :mod:`kelab.sim`, above). Its modules, private to kelab.sim:

- ``_chipmunk``: the facade over pymunk's internals (Chipmunk2D through cffi);
- ``_compile``: a Scene compiled into pymunk objects and the index tables (``Layout``);
- ``_memory``: the memory estimate a World checks before it builds;
- ``_backend``: the ``Backend`` protocol every layout implements;
- ``_batch``: the batch helpers the layouts share (reading, writing and stepping spaces
  through ``pymunk.batch``);
- ``_isolated``: the "isolated" layout, one space per copy;
- ``_packed`` with ``_shards``: the "packed" layout, all copies of a thread shard in one
  space, and its shard threads.

A new layout is a module here implementing ``_backend.Backend`` (tests/sim/
test_backend_protocol.py checks the protocol), built by ``World.__init__`` for its
``layout=`` name (kelab/_validate.py's LAYOUTS). See docs/world.md.
"""
