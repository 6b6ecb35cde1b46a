"""A deterministic simulator of the control plane.

The real JobManager, JobMaster and TaskExecutor run on a virtual clock (clock.py) and
an in-memory network whose deliveries a seeded scheduler delays, drops and reorders
(network.py); tasks are simulated (tasks.py), the planner and the job store are
in-process stand-ins (stand_ins.py), assembled in world.py. schedule.py draws a schedule of faults from a seed,
runs it and checks the invariants after every step (invariants.py). A failing seed
replays exactly: `python -m tests.simulation --seed N --trace`.
"""
