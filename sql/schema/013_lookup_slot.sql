-- Push's partition_lookup update as a HOT update (issue 18). Every push moves the
-- partition's newest-message pointer (last_message_id, last_message_created_at), and
-- last_message_created_at was a key of partition_lookup_queue_idx, so PostgreSQL could
-- never update the row in place: each push wrote a new entry into all three indexes of
-- partition_lookup (0% HOT under push).
--
-- Its readers only need "written recently" at a coarse grain (pop's recency source, the
-- admin "last minute" / "since" ranges), so the index now keys a 10-second slot of
-- last_message_created_at, a stored generated column: PostgreSQL compares the old and new
-- values of every indexed column, and a push within the same slot leaves the slot as it
-- was, so the update stays HOT; a partition's index entries move at most once per slot
-- (every 10 s). partition_id follows in the key so pop can start inside a slot at a random
-- partition (sql/functions/pop.sql, queen.pop_candidates).
--
-- The expression is queen.lookup_slot (sql/functions/core.sql), written out here because
-- schema files run before the function files; sql/test/10_push.sql checks they agree.
-- Adding the column rewrites partition_lookup once (one row per partition).
ALTER TABLE queen.partition_lookup
    ADD COLUMN IF NOT EXISTS last_message_slot bigint
    GENERATED ALWAYS AS (
        floor(extract(epoch FROM last_message_created_at
                                 - timestamptz '1970-01-01 00:00:00+00') / 10)::bigint) STORED;

CREATE INDEX IF NOT EXISTS partition_lookup_slot_idx
    ON queen.partition_lookup (queue_id, last_message_slot, partition_id);

DROP INDEX IF EXISTS queen.partition_lookup_queue_idx;
