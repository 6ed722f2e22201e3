"""The metadata quorum: KRaft-style Raft as a pure core (``core.RaftCore``) plus an IO shell
(``driver.RaftNode``).  See docs/INTERNALS.md "raft" for the contracts and
tests/sim for the seeded simulation that checks the core's safety properties."""
