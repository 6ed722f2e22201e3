"""Leader/follower replication of partition logs (Kafka's ISR model; DESIGN.md section 6).

One concept per file: ``replica_state`` (leader-side follower positions, ISR and high
watermark; pure), ``divergence`` (the diverging-epoch check and the follower's truncation
point; pure), ``faults`` (the follower fetch fault hook), ``leader_fetch`` (the leader's
answer to follower fetches), ``fetcher`` (follower fetcher threads), ``isr`` (ISR shrink and
expand through the controller's AlterPartition), ``manager`` (wiring into the broker).
"""
