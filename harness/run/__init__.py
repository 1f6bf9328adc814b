"""Running tasks on a model: the runner (`runner`: load, check, run, write the results file), the
results cache (`cache`), pinned numerics and threads (`reproducible`) and freed memory kept for
reuse (`heap`).

May import: `harness.scoring` and everything below it; never a task or the leaderboard (the runner
is handed task classes).
"""
