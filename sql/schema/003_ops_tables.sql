-- Operations tables: retention history, system state (maintenance flags, seeded),
-- stats, stats history, system metrics (idempotent, as schema/001).

CREATE TABLE IF NOT EXISTS queen.retention_history (
    id             bigserial PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen.partitions(id) ON DELETE CASCADE,
    messages_deleted integer NOT NULL DEFAULT 0,
    retention_type text NOT NULL,
    executed_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS retention_history_executed_idx ON queen.retention_history (executed_at DESC);

CREATE INDEX IF NOT EXISTS retention_history_partition_idx ON queen.retention_history (partition_id);

CREATE TABLE IF NOT EXISTS queen.system_state (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO queen.system_state (key, value) VALUES
    ('maintenance_mode', '{"enabled": false}'),
    ('pop_maintenance_mode', '{"enabled": false}')
ON CONFLICT (key) DO NOTHING;

-- Statistics (refreshed by the broker's stats job). stat_key identifies the
-- namespace/task/queue/partition; queue_id links rows to a queue when there is one.
CREATE TABLE IF NOT EXISTS queen.stats (
    stat_type          text NOT NULL CHECK (stat_type IN ('system','namespace','task','queue','partition')),
    stat_key           text NOT NULL,
    queue_id           uuid REFERENCES queen.queues(id) ON DELETE CASCADE,
    partition_id       uuid REFERENCES queen.partitions(id) ON DELETE CASCADE,
    total_messages     bigint NOT NULL DEFAULT 0,
    pending_messages   bigint NOT NULL DEFAULT 0,
    processing_messages bigint NOT NULL DEFAULT 0,
    completed_messages bigint NOT NULL DEFAULT 0,
    dead_letter_messages bigint NOT NULL DEFAULT 0,
    lag_seconds        double precision,
    avg_lag_seconds    double precision,
    max_lag_seconds    double precision,
    messages_per_second double precision,
    last_scanned_at    timestamptz,
    details            jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stat_type, stat_key)
);

CREATE INDEX IF NOT EXISTS stats_queue_idx ON queen.stats (queue_id);

CREATE TABLE IF NOT EXISTS queen.stats_history (
    stat_type   text NOT NULL,
    stat_key    text NOT NULL,
    bucket_time timestamptz NOT NULL,
    queue_id    uuid REFERENCES queen.queues(id) ON DELETE CASCADE,
    data        jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (stat_type, stat_key, bucket_time)
);

CREATE INDEX IF NOT EXISTS stats_history_bucket_idx ON queen.stats_history (bucket_time);

CREATE TABLE IF NOT EXISTS queen.system_metrics (
    id         bigserial PRIMARY KEY,
    ts         timestamptz NOT NULL DEFAULT now(),
    hostname   text NOT NULL,
    port       integer NOT NULL,
    worker_id  text NOT NULL,
    metrics    jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT system_metrics_key UNIQUE (ts, hostname, port, worker_id)
);

CREATE INDEX IF NOT EXISTS system_metrics_ts_idx ON queen.system_metrics (ts);
