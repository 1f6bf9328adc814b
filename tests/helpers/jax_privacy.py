"""jax_privacy's one-run auditing module (google-deepmind/jax_privacy, `jax_privacy/auditing.py`), the audit's
peer implementation, read from its pinned PyPI wheel and never installed: the wheels of jax_privacy 2.0.0 and of
its one import beyond NumPy and SciPy, dp_accounting 0.6.0, are fetched with `pip download --no-deps`,
sha256-verified and extracted into the membench cache (`harness.files.sources.WheelFolder`), and `auditing.py`
is loaded as a module of its own (the package's `__init__` imports JAX, which the auditing code does not use).
dp_accounting is put on `sys.path` from the cache, not installed: its metadata pins attrs < 24, which the test
environment does not have and the functions used here do not need."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from types import ModuleType

from harness.files.sources import WheelFolder

JAX_PRIVACY = WheelFolder("jax_privacy", "2.0.0", "2621f70069ffc897d2a1976ff335871d96211cb4c5c927724fc7778306521350",
                          "jax_privacy", license="Apache-2.0")
DP_ACCOUNTING = WheelFolder("dp_accounting", "0.6.0",
                            "6b34aa04034b723235f62337869e6a7c132ceddd60d02d4c89ddf0e561c21d59", "dp_accounting",
                            license="Apache-2.0")


@cache
def auditing() -> ModuleType:
    """`jax_privacy.auditing`, loaded from the cached wheel as the module `jax_privacy_auditing`."""
    accounting = DP_ACCOUNTING.fetch()
    if str(accounting.parent) not in sys.path:
        sys.path.append(str(accounting.parent))
    source = JAX_PRIVACY.fetch() / "auditing.py"
    spec = importlib.util.spec_from_file_location("jax_privacy_auditing", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module
