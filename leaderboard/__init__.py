"""submissions/*.json -> LEADERBOARD.md (+ one plot per task): a pure function of the submissions."""
