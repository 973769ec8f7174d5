"""The ledger: the hash-chained SQLite record of every attempt, and what guards it.

`_store` is the ledger itself (tables, appends, the writer thread, the integrity check `run`
shares with `verify`), `_chain` the row encoding and hash chain, `_contents` the stored bodies
(deduplicated and compressed) and their check, `_head` the head anchor outside the database that
detects a cut tail. Its public names are `trustbench.core`'s.
"""
