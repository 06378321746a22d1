-- Cleanup job: inactive partitions and old metrics rows.

-- Cleanup job (semantics.md §12 steps 3 and 4): inactive partitions and old
-- metrics rows. One call of queen.cleanup is one bounded round in its own
-- transaction under the try advisory lock 737005 (one broker of a cluster at a
-- time; a busy lock is a skip), recorded in queen.job_runs like the other jobs.
--
-- Inactive partition: no message, no dead-letter row, no live lease, and no
-- activity for `days` (partitions.last_activity and the newest message stamp of
-- partition_lookup both older). The partition_lookup rows are locked FOR UPDATE
-- SKIP LOCKED first: a push appending to the partition holds that row (FOR NO
-- KEY UPDATE), so a partition being pushed to is skipped, and once locked no
-- push can add a message until the delete commits (a push waiting on the lock
-- then finds the partition gone and creates it again). The emptiness check runs
-- after the lock, in a new statement, so it sees every committed message.
-- Deleting the partition cascades to its lookup row, cursors, roll-up row and
-- history rows. The deletion is counted in job_runs (rows), not in
-- retention_history, whose rows cascade with the partition.
--
-- Metrics rows: retention_history, messages_consumed and system_metrics rows
-- older than `metricsDays`, at most batchSize per table per round.

-- ---------------------------------------------------------------------------
-- queen.cleanup(p)  in {days, metricsDays, partitions: bool, batchSize, broker}
--   out {job: "cleanup", ran, rows, partitions, metrics}
--   days = 0 or partitions = false skips the partition step.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.cleanup(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_days    int := coalesce((p->>'days')::int, 30);
    v_mdays   int := coalesce((p->>'metricsDays')::int, 90);
    v_batch   int := greatest(coalesce((p->>'batchSize')::int, 1000), 1);
    v_cut     timestamptz;
    v_mcut    timestamptz;
    v_pids    uuid[];
    v_parts   int := 0;
    v_metrics int := 0;
    v_n       int;
    v_run     bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(737005) THEN
        RETURN jsonb_build_object('job', 'cleanup', 'ran', false, 'rows', 0);
    END IF;
    INSERT INTO queen.job_runs (job, broker, started_at)
    VALUES ('cleanup', p->>'broker', clock_timestamp()) RETURNING id INTO v_run;

    IF v_days > 0 AND coalesce((p->>'partitions')::boolean, true) THEN
        v_cut := now() - v_days * interval '1 day';
        SELECT coalesce(array_agg(x.pid), '{}') INTO v_pids FROM (
            SELECT pl.partition_id AS pid
              FROM queen.partitions pt
              JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
             WHERE pt.last_activity < v_cut AND pt.created_at < v_cut
               AND (pl.last_message_created_at IS NULL OR pl.last_message_created_at < v_cut)
             LIMIT v_batch
               FOR UPDATE OF pl SKIP LOCKED) x;
        DELETE FROM queen.partitions pt
         WHERE pt.id = ANY (v_pids)
           AND NOT EXISTS (SELECT 1 FROM queen.messages m WHERE m.partition_id = pt.id)
           AND NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.partition_id = pt.id)
           AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                            WHERE pc.partition_id = pt.id AND pc.worker_id IS NOT NULL
                              AND pc.lease_expires_at > now());
        GET DIAGNOSTICS v_parts = ROW_COUNT;
    END IF;

    IF v_mdays > 0 THEN
        v_mcut := now() - v_mdays * interval '1 day';
        DELETE FROM queen.retention_history h WHERE h.id IN (
            SELECT x.id FROM queen.retention_history x WHERE x.executed_at < v_mcut LIMIT v_batch);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_metrics := v_metrics + v_n;
        DELETE FROM queen.messages_consumed h WHERE h.id IN (
            SELECT x.id FROM queen.messages_consumed x WHERE x.acked_at < v_mcut LIMIT v_batch);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_metrics := v_metrics + v_n;
        DELETE FROM queen.system_metrics h WHERE h.id IN (
            SELECT x.id FROM queen.system_metrics x WHERE x.ts < v_mcut LIMIT v_batch);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_metrics := v_metrics + v_n;
    END IF;

    UPDATE queen.job_runs SET finished_at = clock_timestamp(), rows = v_parts + v_metrics
     WHERE id = v_run;
    RETURN jsonb_build_object('job', 'cleanup', 'ran', true, 'rows', v_parts + v_metrics,
                              'partitions', v_parts, 'metrics', v_metrics);
END $$;
