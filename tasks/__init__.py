"""One package per task; each registers itself from its `task` module (see harness.app.registry.discover)."""
