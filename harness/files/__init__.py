"""Data on disk: declared data sources fetched and verified into the cache (`sources`), and staged
folders published atomically and swept when their writer is gone (`staging`).

May import: `harness.core`.
"""
