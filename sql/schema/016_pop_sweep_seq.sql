-- The start points of pop's deep sweeps (sql/functions/pop.sql,
-- queen.pop_sweep_start). One counter for every pop of every broker, so that
-- successive deep sweeps, whichever backend runs them, start at successive points
-- of one golden-ratio sequence over the partition-id space and cover it evenly
-- (while other queues' sweeps do not take turns with them: see the function),
-- where random starts left a region unswept for seconds now and then (issue 18: a
-- 100,000-partition group drain stalled with 288 messages left in one region).
-- Not transactional (a sequence): concurrent pops never wait on it.
CREATE SEQUENCE IF NOT EXISTS queen.pop_sweep_seq AS bigint;
