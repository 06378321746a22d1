-- Queues, partitions, messages, the per-partition lookup and cursor rows, and
-- consumer-group metadata. Requires PostgreSQL 13+ (gen_random_uuid in core).
-- These statements ran at every boot before the ledger existed, so they are
-- idempotent (a database from then runs them once more on its first boot).

CREATE SCHEMA IF NOT EXISTS queen;

-- ---------------------------------------------------------------------------
-- core tables
-- ---------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS queen.queues (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id                   uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
    name                        text NOT NULL,
    namespace                   text,
    task                        text,
    priority                    integer NOT NULL DEFAULT 0,
    lease_time                  integer NOT NULL DEFAULT 300,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    ttl                         integer NOT NULL DEFAULT 3600,
    dead_letter_queue           boolean NOT NULL DEFAULT false,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_enabled           boolean NOT NULL DEFAULT false,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    max_queue_size              integer NOT NULL DEFAULT 0,
    dedup_window_seconds        integer NOT NULL DEFAULT 3600,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_tenant_name_key UNIQUE (tenant_id, name)
);

CREATE INDEX IF NOT EXISTS queues_tenant_ns_task_idx ON queen.queues (tenant_id, namespace, task);

CREATE TABLE IF NOT EXISTS queen.partitions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id      uuid NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
    name          text NOT NULL DEFAULT 'Default',
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_activity timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT partitions_queue_name_key UNIQUE (queue_id, name)
) WITH (fillfactor = 80);

CREATE TABLE IF NOT EXISTS queen.messages (
    id             uuid PRIMARY KEY,
    transaction_id text NOT NULL,
    trace_id       uuid,
    partition_id   uuid NOT NULL,  -- cascade from partitions by trigger (see below)
    payload        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    is_encrypted   boolean NOT NULL DEFAULT false,
    producer_sub   text,
    CONSTRAINT messages_partition_txn_key UNIQUE (partition_id, transaction_id)
);

CREATE INDEX IF NOT EXISTS messages_partition_pos_idx ON queen.messages (partition_id, created_at, id);

CREATE INDEX IF NOT EXISTS messages_trace_idx ON queen.messages (trace_id) WHERE trace_id IS NOT NULL;

-- messages.partition_id -> partitions ON DELETE CASCADE is implemented by a statement-level
-- trigger instead of a foreign key: the per-row RI check roughly doubled the cost of a push
-- (about 30 us per message on the reference box). Push never inserts for a partition whose
-- partition_lookup row it has not locked (a concurrent partition delete waits for that lock
-- through the lookup's own FK cascade, then this trigger removes the messages), so no orphan
-- can appear.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_constraint
                WHERE conrelid = 'queen.messages'::regclass AND contype = 'f'
                  AND confrelid = 'queen.partitions'::regclass) THEN
        EXECUTE (SELECT 'ALTER TABLE queen.messages DROP CONSTRAINT ' || quote_ident(conname)
                   FROM pg_constraint
                  WHERE conrelid = 'queen.messages'::regclass AND contype = 'f'
                    AND confrelid = 'queen.partitions'::regclass LIMIT 1);
    END IF;
END $$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgrelid = 'queen.partitions'::regclass
                      AND tgname = 'partitions_delete_messages') THEN
        CREATE TRIGGER partitions_delete_messages
            AFTER DELETE ON queen.partitions
            REFERENCING OLD TABLE AS old_partitions
            FOR EACH STATEMENT EXECUTE FUNCTION queen.partitions_delete_messages();
    END IF;
END $$;

-- Newest message per partition (one row per partition, created with the partition).
-- Push locks these rows (FOR NO KEY UPDATE, partition-id order) to serialise appends.
CREATE TABLE IF NOT EXISTS queen.partition_lookup (
    partition_id            uuid PRIMARY KEY REFERENCES queen.partitions(id) ON DELETE CASCADE,
    queue_id                uuid NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
    last_message_id         uuid,
    last_message_created_at timestamptz,
    updated_at              timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50);

CREATE INDEX IF NOT EXISTS partition_lookup_queue_idx
    ON queen.partition_lookup (queue_id, last_message_created_at);

CREATE INDEX IF NOT EXISTS partition_lookup_queue_pid_idx
    ON queen.partition_lookup (queue_id, partition_id);

CREATE TABLE IF NOT EXISTS queen.partition_consumers (
    partition_id            uuid NOT NULL REFERENCES queen.partitions(id) ON DELETE CASCADE,
    consumer_group          text NOT NULL DEFAULT '__QUEUE_MODE__',
    last_consumed_id        uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    last_consumed_created_at timestamptz,
    total_messages_consumed bigint NOT NULL DEFAULT 0,
    total_batches_consumed  bigint NOT NULL DEFAULT 0,
    last_consumed_at        timestamptz,
    lease_expires_at        timestamptz,
    lease_acquired_at       timestamptz,
    worker_id               uuid,
    batch_size              integer NOT NULL DEFAULT 0,
    acked_count             integer NOT NULL DEFAULT 0,
    batch_retry_count       integer NOT NULL DEFAULT 0,
    created_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT partition_consumers_key UNIQUE (partition_id, consumer_group),
    CONSTRAINT partition_consumers_cursor_chk CHECK (
        (last_consumed_id = '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NULL)
        OR (last_consumed_id <> '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NOT NULL))
) WITH (fillfactor = 50,
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 100,
        autovacuum_analyze_scale_factor = 0.05);

CREATE INDEX IF NOT EXISTS partition_consumers_worker_idx
    ON queen.partition_consumers (worker_id) WHERE worker_id IS NOT NULL;

CREATE INDEX IF NOT EXISTS partition_consumers_group_idx
    ON queen.partition_consumers (consumer_group);

-- "behind": set when a release leaves the cursor short of the partition's newest message.
-- Pop's candidate scan reads the group's suspect rows (lease set, retrying or behind)
-- through the partial index below instead of probing every partition of the queue.
ALTER TABLE queen.partition_consumers ADD COLUMN IF NOT EXISTS behind boolean NOT NULL DEFAULT false;

CREATE INDEX IF NOT EXISTS partition_consumers_suspect_idx
    ON queen.partition_consumers (consumer_group, partition_id)
    WHERE worker_id IS NOT NULL OR behind OR batch_retry_count > 0;

-- Subscription registration ("first registration wins"). partition_name '' = whole queue;
-- namespace/task '' when unused. subscription_timestamp NULL = from the beginning.
CREATE TABLE IF NOT EXISTS queen.consumer_groups_metadata (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id               uuid NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
    consumer_group         text NOT NULL,
    queue_name             text NOT NULL,
    partition_name         text NOT NULL DEFAULT '',
    namespace              text NOT NULL DEFAULT '',
    task                   text NOT NULL DEFAULT '',
    subscription_mode      text NOT NULL DEFAULT 'all',
    subscription_timestamp timestamptz,
    conflation             jsonb,
    created_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT consumer_groups_metadata_key
        UNIQUE (queue_id, consumer_group, partition_name, namespace, task)
);

CREATE INDEX IF NOT EXISTS consumer_groups_metadata_group_idx
    ON queen.consumer_groups_metadata (consumer_group, queue_name);

CREATE TABLE IF NOT EXISTS queen.consumer_watermarks (
    queue_id           uuid NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
    queue_name         text NOT NULL,
    consumer_group     text NOT NULL,
    last_empty_scan_at timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);
