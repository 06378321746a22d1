-- Incremental stats roll-up, second step (issue 18): the position of the reference
-- cursor each partition's after_ref was counted against (partition_stats.ref_ts,
-- ref_id), so that a rescan counts only the rows the cursor passed since the last
-- scan instead of every row after it. Why and how: functions/stats.sql
-- (queen.stats_scan_partitions). No default: a row written before this file has no
-- known position (NULL) and its next scan counts the partition from scratch.
ALTER TABLE queen.partition_stats
    ADD COLUMN IF NOT EXISTS ref_ts timestamptz,
    ADD COLUMN IF NOT EXISTS ref_id uuid;
