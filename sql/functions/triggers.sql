-- Trigger functions. Applied before the schema files, which create the triggers that call them.

-- ==== 001_schema ====
-- Queen schema (idempotent: applied at every boot, in numeric order, under a session
-- advisory lock). Never edit a landed file: add a new numbered file instead.
-- Requires PostgreSQL 13+ (gen_random_uuid in core).

CREATE OR REPLACE FUNCTION queen.partitions_delete_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.messages m USING old_partitions o WHERE m.partition_id = o.id;
    RETURN NULL;
END $$;

-- ==== 080_message_refs ====
-- Dead letters and traces follow their message by statement-level trigger
-- instead of foreign key (issue 3: retention at 5,000 msg/s must not slow push
-- by more than 10%).
--
-- dead_letter_queue.message_id and message_traces.message_id referenced
-- queen.messages ON DELETE CASCADE (sql/001). A foreign key cascades with one
-- row trigger per deleted message per referencing table: two SPI deletes per
-- message, about 15 ms of every 1,000-row retention round (60% of its cost
-- once the round deletes by key, sql/079), paid even though both tables are
-- almost always empty for the messages retention removes. The same trade as
-- messages.partition_id (sql/001): keep both halves of the constraint, in
-- cheaper form:
--   * delete side: one AFTER DELETE ... FOR EACH STATEMENT trigger on
--     queen.messages deletes the dead letters and traces of every deleted
--     message in two set-based statements over the transition table;
--   * insert side: a BEFORE INSERT OR UPDATE OF message_id row trigger on each
--     referencing table locks the message FOR KEY SHARE, as the foreign key's
--     own check did, and raises foreign_key_violation (23503) when it is gone.
-- Concurrency is the foreign key's: an insert that locked its message first
-- makes a concurrent delete of that message wait for the insert's commit, and
-- the delete's trigger statement (a new snapshot in READ COMMITTED) then sees
-- and removes the new row; an insert that comes second waits for the delete's
-- commit, then finds no message and fails. Every writer of these tables
-- (ack, move-to-DLQ, trace_add) reads the message in the same transaction
-- first, so none of them relied on the error.

CREATE OR REPLACE FUNCTION queen.message_ref_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM queen.messages m WHERE m.id = NEW.message_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('%s.message_id %s is not present in queen.messages',
                             TG_TABLE_NAME, NEW.message_id);
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION queen.messages_delete_refs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.dead_letter_queue d USING old_messages o WHERE d.message_id = o.id;
    DELETE FROM queen.message_traces t USING old_messages o WHERE t.message_id = o.id;
    RETURN NULL;
END $$;

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

CREATE OR REPLACE FUNCTION queen.messages_stamp_deletes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.stats_deleted AS s (partition_id, deleted_at)
    SELECT d.partition_id, clock_timestamp()
      FROM (SELECT DISTINCT o.partition_id FROM old_rows o) d
     WHERE EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.id = d.partition_id)
    ON CONFLICT (partition_id) DO UPDATE SET deleted_at = EXCLUDED.deleted_at;
    -- a partition deleted meanwhile leaves a row nobody reads again: drop those
    DELETE FROM queen.stats_deleted s
     WHERE s.partition_id IN (SELECT DISTINCT o.partition_id FROM old_rows o)
       AND NOT EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.id = s.partition_id);
    RETURN NULL;
END $$;
