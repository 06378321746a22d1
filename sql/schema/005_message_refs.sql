-- Dead letters and traces follow their message by statement-level trigger
-- instead of foreign key (issue 3: retention at 5,000 msg/s must not slow push
-- by more than 10%).
--
-- dead_letter_queue.message_id and message_traces.message_id referenced
-- queen.messages ON DELETE CASCADE (schema/001). A foreign key cascades with one
-- row trigger per deleted message per referencing table: two SPI deletes per
-- message, about 15 ms of every 1,000-row retention round (60% of its cost
-- once the round deletes by key, queen.maintenance), paid even though both tables are
-- almost always empty for the messages retention removes. The same trade as
-- messages.partition_id (schema/001): keep both halves of the constraint, in
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

DO $$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'queen.messages'::regclass
                      AND tgname = 'messages_delete_refs') THEN
        CREATE TRIGGER messages_delete_refs
            AFTER DELETE ON queen.messages
            REFERENCING OLD TABLE AS old_messages
            FOR EACH STATEMENT EXECUTE FUNCTION queen.messages_delete_refs();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'queen.dead_letter_queue'::regclass
                      AND tgname = 'dead_letter_queue_message_ref') THEN
        CREATE TRIGGER dead_letter_queue_message_ref
            BEFORE INSERT OR UPDATE OF message_id ON queen.dead_letter_queue
            FOR EACH ROW EXECUTE FUNCTION queen.message_ref_check();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'queen.message_traces'::regclass
                      AND tgname = 'message_traces_message_ref') THEN
        CREATE TRIGGER message_traces_message_ref
            BEFORE INSERT OR UPDATE OF message_id ON queen.message_traces
            FOR EACH ROW EXECUTE FUNCTION queen.message_ref_check();
    END IF;
    -- Only now (the triggers are in place) drop the foreign keys, in the same
    -- transaction, so no moment exists without either.
    FOR r IN SELECT conrelid::regclass AS tbl, conname FROM pg_constraint
              WHERE contype = 'f' AND confrelid = 'queen.messages'::regclass
                AND conrelid IN ('queen.dead_letter_queue'::regclass,
                                 'queen.message_traces'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, r.conname);
    END LOOP;
END $$;
