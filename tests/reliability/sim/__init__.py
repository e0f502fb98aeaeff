"""The deterministic simulation (issue 26, item 3): dispatch's sans-I/O programs against an in-memory API server and
compact discrete-event controllers on one virtual clock, one seed deciding every interleaving, fast enough to search.

`store.py` is the API server as far as dispatch's programs and the controllers use it; `world.py` the controllers,
machines, people and dispatch callers; `search.py` runs seeds, shrinks a failure and replays it (the CLI). The
live-lab model (`tests/reliability/world.py`) stays the fidelity check: this one leaves out everything the rule
does not read (docs/reliability.md, "The search").
"""
