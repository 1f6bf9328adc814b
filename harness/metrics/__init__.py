"""Metrics as pure functions on numbers and strings (NumPy, SciPy, scikit-learn, rapidfuzz; no torch):
membership inference, memorization and extraction scores (`memorization`), WEAT and StereoSet
(`bias`). Each docstring states its formula and its source.

May import: nothing else of membench.
"""
