-- ==== 081_stats_incremental ====
-- Incremental stats roll-up (issue 3: "statistics are computed incrementally or by a
-- bounded background job"). Redefines queen.stats_rollup (sql/015) with the same
-- contract and replaces stats_scan_partitions(uuid[]) by a two-argument version.
--
-- Why: every partition a push touched since its last scan was rescanned with
-- count(*) over all of its messages. Under steady push to every partition that is
-- the whole of queen.messages every STATS_INTERVAL_MS: on this 2-core box, with 1.3M
-- rows over 1,000 partitions, a cycle ran for 20 s without a break (fresh rows have
-- no visibility-map bits, so the index-only count visits the heap) and push b10
-- fell from ~23k to ~9k msg/s while it ran.
--
-- Now a rescan counts only the rows appended since the previous one and adds them
-- to the total. This is exact because of the append-order invariant (semantics.md
-- §3): in a partition, a message that commits later has a greater (created_at, id)
-- than every message visible before, so "visible and after the position counted up
-- to" is exactly "not yet counted". The position counted up to is the partition's
-- newest-message pointer read in the same snapshot (push moves it in the
-- transaction that inserts). Only the stats job writes partition_stats.total, under
-- its advisory lock, so the read-add-write cannot race another writer.
--
-- Deletes are not appended rows, so a partition is counted from scratch instead
-- when: it was never counted; POST /stats/refresh forced it (scanned_at
-- '-infinity'); its last full count is older than the reconcile interval; rows were
-- deleted from it since its last scan, whoever deleted them (retention, eviction,
-- the message and clear endpoints, a cascade): a statement-level trigger on
-- queen.messages stamps the partition in queen.stats_deleted; or its row was last
-- written by a scan that did not record a position (counted_at <> scanned_at: an
-- older stats_rollup, as sql/015 briefly is again while a booting broker re-applies
-- the files one by one). Scopes small enough to be counted live (sql/015:
-- stats_use_rollup) never read these rows.

DO $$
BEGIN
    -- guarded, so that a boot does not take an exclusive lock on the table when the
    -- columns exist already
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = 'queen.partition_stats'::regclass
                      AND attname = 'counted_at' AND NOT attisdropped) THEN
        ALTER TABLE queen.partition_stats
            ADD COLUMN IF NOT EXISTS counted_ts timestamptz,  -- position counted up to
            ADD COLUMN IF NOT EXISTS counted_id uuid,         --   (created_at, id)
            ADD COLUMN IF NOT EXISTS counted_at timestamptz,  -- scanned_at of that scan
            ADD COLUMN IF NOT EXISTS full_at    timestamptz;  -- last count from scratch
    END IF;
END $$;

-- Partitions rows were deleted from, and when (clock time of the deleting
-- statement). Written by the trigger below, read by the rescan; no foreign key: a
-- partition delete removes its messages from a trigger, after the partition row.
CREATE TABLE IF NOT EXISTS queen.stats_deleted (
    partition_id uuid PRIMARY KEY,
    deleted_at   timestamptz NOT NULL
);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgname = 'messages_stamp_deletes'
                      AND tgrelid = 'queen.messages'::regclass) THEN
        CREATE TRIGGER messages_stamp_deletes
            AFTER DELETE ON queen.messages
            REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION queen.messages_stamp_deletes();
    END IF;
END $$;
