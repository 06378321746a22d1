-- Tables of the background jobs (job_runs) and of the statistics roll-up
-- (partition_stats); idempotent, as schema/001.
--
-- Background jobs (semantics.md §12): retention, completed retention,
-- max-wait eviction and expired-lease reclaim. One call of queen.maintenance
-- is one bounded round of one job in its own transaction, under a
-- transaction-level try advisory lock per job so that one broker of a cluster
-- runs a job at a time (a busy lock means "another broker is on it": skip).

-- Every round that took the lock (who, when): the overlap check of the tests
-- and an operator's view of which broker runs the jobs. Pruned after a day.
CREATE TABLE IF NOT EXISTS queen.job_runs (
    id          bigserial PRIMARY KEY,
    job         text NOT NULL,
    broker      text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    rows        integer NOT NULL DEFAULT 0
);

CREATE INDEX IF NOT EXISTS job_runs_job_started_idx ON queen.job_runs (job, started_at);

-- Statistics roll-up (issue 3; data-model.md "Statistics and metrics tables",
-- http-api.md §8/§12). A bounded background job (queen.stats_rollup, one round
-- per call, try advisory lock 737004) keeps per-partition counts in
-- queen.partition_stats and per-queue rows in queen.stats / queen.stats_history,
-- so the status and catalogue endpoints never count a large queue's messages on
-- the request path.
--
-- Freshness: a partition is rescanned when a push moved its newest message
-- (partition_lookup.updated_at), when one of its cursors or leases moved
-- (partition_consumers timestamps), when it was never scanned, when
-- POST /stats/refresh asked for it, or at the latest after the reconcile interval
-- (deletes by retention, seek or clear stamp nothing). scanned_at is set a margin
-- before the scan so that a push committing while the scan ran is seen next round.

CREATE TABLE IF NOT EXISTS queen.partition_stats (
    partition_id     uuid PRIMARY KEY REFERENCES queen.partitions(id) ON DELETE CASCADE,
    queue_id         uuid NOT NULL REFERENCES queen.queues(id) ON DELETE CASCADE,
    total            bigint NOT NULL DEFAULT 0,
    -- messages after the reference cursor (queue mode, else the furthest-behind group)
    after_ref        bigint NOT NULL DEFAULT 0,
    -- undelivered part of the reference cursor's lease batch, and that lease's expiry:
    -- readers derive "processing" with the clock of the read
    inflight         integer NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    dead             bigint NOT NULL DEFAULT 0,
    -- sum of total_messages_consumed over the partition's groups
    consumed         bigint NOT NULL DEFAULT 0,
    -- groups with something pending here: {"<group>": {"lag": n, "oldest": iso}}
    groups           jsonb NOT NULL DEFAULT '{}'::jsonb,
    scanned_at       timestamptz NOT NULL
) WITH (fillfactor = 70);

CREATE INDEX IF NOT EXISTS partition_stats_queue_idx ON queen.partition_stats (queue_id);

CREATE INDEX IF NOT EXISTS partition_stats_scanned_idx ON queen.partition_stats (scanned_at);
