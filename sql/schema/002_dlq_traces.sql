-- Dead letters, message traces and their names, consumed-message counters
-- (idempotent, as schema/001).

CREATE TABLE IF NOT EXISTS queen.dead_letter_queue (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id          uuid NOT NULL REFERENCES queen.messages(id) ON DELETE CASCADE,
    partition_id        uuid NOT NULL REFERENCES queen.partitions(id) ON DELETE CASCADE,
    consumer_group      text NOT NULL DEFAULT '__QUEUE_MODE__',
    error_message       text,
    retry_count         integer NOT NULL DEFAULT 0,
    original_created_at timestamptz,
    failed_at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS dead_letter_queue_partition_idx ON queen.dead_letter_queue (partition_id);

CREATE INDEX IF NOT EXISTS dead_letter_queue_group_idx ON queen.dead_letter_queue (consumer_group);

CREATE INDEX IF NOT EXISTS dead_letter_queue_failed_at_idx ON queen.dead_letter_queue (failed_at DESC);

CREATE UNIQUE INDEX IF NOT EXISTS dead_letter_queue_message_group_idx
    ON queen.dead_letter_queue (message_id, consumer_group);

-- ---------------------------------------------------------------------------
-- traces, accounting, state
-- ---------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS queen.message_traces (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id     uuid NOT NULL REFERENCES queen.messages(id) ON DELETE CASCADE,
    partition_id   uuid NOT NULL REFERENCES queen.partitions(id) ON DELETE CASCADE,
    transaction_id text NOT NULL,
    consumer_group text,
    event_type     text NOT NULL DEFAULT 'info',
    data           jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    worker_id      text
);

CREATE INDEX IF NOT EXISTS message_traces_message_idx ON queen.message_traces (message_id);

CREATE INDEX IF NOT EXISTS message_traces_txn_idx ON queen.message_traces (transaction_id, partition_id);

CREATE INDEX IF NOT EXISTS message_traces_created_idx ON queen.message_traces (created_at DESC);

CREATE INDEX IF NOT EXISTS message_traces_partition_idx ON queen.message_traces (partition_id);

CREATE TABLE IF NOT EXISTS queen.message_trace_names (
    trace_id   uuid NOT NULL REFERENCES queen.message_traces(id) ON DELETE CASCADE,
    trace_name text NOT NULL,
    PRIMARY KEY (trace_id, trace_name)
);

CREATE INDEX IF NOT EXISTS message_trace_names_name_idx ON queen.message_trace_names (trace_name);

CREATE TABLE IF NOT EXISTS queen.messages_consumed (
    id                 bigserial PRIMARY KEY,
    partition_id       uuid NOT NULL REFERENCES queen.partitions(id) ON DELETE CASCADE,
    consumer_group     text NOT NULL,
    messages_completed integer NOT NULL DEFAULT 0,
    messages_failed    integer NOT NULL DEFAULT 0,
    acked_at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS messages_consumed_acked_idx ON queen.messages_consumed (acked_at DESC);

CREATE INDEX IF NOT EXISTS messages_consumed_partition_idx ON queen.messages_consumed (partition_id, acked_at);
