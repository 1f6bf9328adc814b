"""The application: the `membench` command line (`cli`), the `membench run` job (`job`), the task
registry filled from `tasks/` (`registry`) and what is printed for the user (`report`).

May import: everything, the task packages and the leaderboard included (the only part of
`harness` that does).
"""
