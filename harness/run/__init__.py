"""Running tasks on a model: the runner (`runner`: load, check, run, write the results file), the
results cache (`cache`) and pinned numerics and threads (`reproducible`).

May import: `harness.scoring` and everything below it; never a task or the leaderboard (the runner
is handed task classes).
"""
