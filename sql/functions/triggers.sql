-- Trigger functions. Applied before the schema files, which create the triggers that call them.

-- Deletes the messages of the deleted partitions: messages.partition_id has no
-- foreign key (schema/001 says why).
CREATE OR REPLACE FUNCTION queen.partitions_delete_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.messages m USING old_partitions o WHERE m.partition_id = o.id;
    RETURN NULL;
END $$;

-- Dead letters and traces follow their message by trigger instead of foreign
-- key (why: schema/005, which creates the triggers).

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

-- The delete stamp of the incremental stats roll-up (schema/006; why: the
-- header of queen.stats_scan_partitions in functions/stats.sql).

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
