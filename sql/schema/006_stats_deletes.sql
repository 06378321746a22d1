-- Incremental stats roll-up: the position each partition's count was taken up
-- to (partition_stats.counted_*), and queen.stats_deleted, stamped by a
-- statement-level trigger on queen.messages, so that a partition rows were
-- deleted from is counted from scratch. Why and how: functions/stats.sql
-- (queen.stats_scan_partitions). Idempotent, as schema/001.

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
