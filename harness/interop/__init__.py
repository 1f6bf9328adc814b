"""membench with its peers: tasks exported to lm-evaluation-harness and its results imported back
(`lm_eval_export`, `lm_eval_import`, one metadata model `lm_eval_meta`), and the headline metrics
as Hugging Face `evaluate` modules (`evaluate_modules`).

May import: `harness.run` and everything below it; the task registry is handed in by the application.
"""
