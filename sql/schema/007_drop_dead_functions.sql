-- Functions that are gone: superseded signatures and functions nothing calls.
-- A data directory made before the two-kind layout still has them.
DROP FUNCTION IF EXISTS queen.stats_scan_partitions(uuid[]);
DROP FUNCTION IF EXISTS queen.push_fast(jsonb);
DROP FUNCTION IF EXISTS queen.health();
