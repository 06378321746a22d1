-- Lease set and clear as HOT updates (issue 18). Every pop that leases a partition and
-- every ack that releases it rewrote the partition_consumers row with new entries in
-- all of its indexes, because worker_id was an index key (partition_consumers_worker_idx)
-- and part of the suspect index's predicate: PostgreSQL only updates in place (HOT)
-- when no indexed or predicate column changes value.
--
-- Now a leased row is always "behind" (its cursor is short of the leased messages, so
-- the flag is true anyway): pop_claim sets it with the lease, and the suspect index
-- covers leased rows through it. A release on a partition with more to read keeps
-- behind true, so the pop + ack cycle of a backlog changes no indexed column.
--
-- The worker_id index goes: its readers look a lease up by id alone (extend_lease,
-- a transaction's requiredLeases), rare calls that now read the partition_consumers
-- rows (one per partition and group); the lease reclaim job reads the suspect index.

-- the invariant for rows leased before this file
UPDATE queen.partition_consumers SET behind = true
 WHERE worker_id IS NOT NULL AND NOT behind;

DROP INDEX IF EXISTS queen.partition_consumers_worker_idx;

DROP INDEX IF EXISTS queen.partition_consumers_suspect_idx;
CREATE INDEX IF NOT EXISTS partition_consumers_suspect_idx
    ON queen.partition_consumers (consumer_group, partition_id)
    WHERE behind OR batch_retry_count > 0;
