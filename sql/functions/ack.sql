-- Acknowledgement and lease extension.

-- Acknowledgement and lease extension.

-- ---------------------------------------------------------------------------
-- queen.ack_batch(p)
--   in : {tenant, txn:bool, items:[{transactionId, partitionId, status, group,
--                                   leaseId|null, error|null}]}
--   out: [{index, transactionId, partitionId, success, error, queueName, partitionName,
--          leaseReleased, dlq}]
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.ack_batch(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN queen.ack_items(queen.try_uuid(p->>'tenant'), p->'items',
                           coalesce((p->>'txn')::boolean, false));
END $$;

-- ---------------------------------------------------------------------------
-- queen.extend_lease(p)
--   in : {tenant, leaseId, seconds}; only claims on the tenant's partitions count,
--        so another tenant's lease answers exactly as one that does not exist
--   out: {leaseId, success:true, expiresAt, newExpiresAt}
--      | {leaseId, success:false, error:"Lease not found"|"Lease already expired"}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.extend_lease(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_lease  uuid := queen.try_uuid(p->>'leaseId');
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'),
                              '00000000-0000-0000-0000-000000000001');
    v_secs   numeric := coalesce((p->>'seconds')::numeric, 60);
    v_exp    timestamptz;
BEGIN
    IF v_lease IS NULL THEN
        RETURN jsonb_build_object('leaseId', p->>'leaseId', 'success', false,
                                  'error', 'Lease not found');
    END IF;
    WITH u AS (
        UPDATE queen.partition_consumers pc
           SET lease_expires_at = greatest(pc.lease_expires_at, now() + v_secs * interval '1 second')
          FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
         WHERE pc.worker_id = v_lease AND pc.lease_expires_at > now()
           AND pt.id = pc.partition_id AND q.tenant_id = v_tenant
        RETURNING pc.lease_expires_at)
    SELECT max(lease_expires_at) INTO v_exp FROM u;

    IF v_exp IS NULL THEN
        RETURN jsonb_build_object('leaseId', v_lease, 'success', false,
            'error', CASE WHEN EXISTS (SELECT 1 FROM queen.partition_consumers pc
                                         JOIN queen.partitions pt ON pt.id = pc.partition_id
                                         JOIN queen.queues q ON q.id = pt.queue_id
                                        WHERE pc.worker_id = v_lease AND q.tenant_id = v_tenant)
                          THEN 'Lease already expired' ELSE 'Lease not found' END);
    END IF;
    RETURN jsonb_build_object('leaseId', v_lease, 'success', true,
                              'expiresAt', queen.iso(v_exp), 'newExpiresAt', queen.iso(v_exp));
END $$;

-- Cheaper acknowledgement (issue 2: drain pop b100 + ack/batch at >= 1.5x the original).
-- queen.ack_typed (under queen.ack_items) has a set-based pass in front of its per-item loop.
--
-- The common ack/batch (every message of one leased batch acknowledged `completed`) made
-- the loop read and update the same partition_consumers row once per item: 100 row
-- versions and 200 statements for a batch of 100. The set-based pass applies such a
-- (partition, group) with ONE update, when all its items of the call are
-- completed/success acks of found, distinct messages past the cursor, under the one
-- live lease that holds the partition, and do not overrun the leased batch
-- (acked_count + n <= batch_size). Outcome as the loop would give: cursor at the last
-- item by position, acked_count and total_messages_consumed + n, the lease released
-- (and total_batches_consumed + 1) when the batch is done, leaseReleased true on the
-- last item only, `behind` from partition_lookup. Everything else (unknown messages,
-- other statuses, no or wrong lease, re-acks, mixed groups) goes through the loop,
-- as it always did.

-- ---------------------------------------------------------------------------
-- queen.ack_items(tenant, items, txn) -- shared by ack_batch and transaction
--   items: [{transactionId, partitionId, status, group, leaseId|null, error|null}]
--   returns an array aligned with items:
--     {index, transactionId, partitionId, success, error, queueName, partitionName,
--      leaseReleased, dlq}
--   txn=true: failed/dlq write the DLQ row directly (default error "Unknown error").
-- Reads the items once into arrays and answers through queen.ack_typed.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.ack_items(p_tenant uuid, p_items jsonb, p_txn boolean)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    a_txid   text[];
    a_pid    uuid[];
    a_grp    text[];
    a_status text[];
    a_lease  uuid[];
    a_err    text[];
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    SELECT array_agg(e.v->>'transactionId'), array_agg(queen.try_uuid(e.v->>'partitionId')),
           array_agg(coalesce(nullif(e.v->>'group', ''), '__QUEUE_MODE__')),
           array_agg(lower(coalesce(e.v->>'status', 'completed'))),
           array_agg(queen.try_uuid(e.v->>'leaseId')), array_agg(e.v->>'error')
      INTO a_txid, a_pid, a_grp, a_status, a_lease, a_err
      FROM (SELECT x.v FROM jsonb_array_elements(p_items) WITH ORDINALITY AS x(v, ord)
             ORDER BY x.ord) e;
    RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'index', u.o - 1, 'transactionId', a_txid[u.o], 'partitionId', a_pid[u.o],
                       'success', u.ok, 'error', u.err, 'queueName', u.qname,
                       'partitionName', u.pname, 'leaseReleased', u.rel, 'dlq', u.dlq)
                       ORDER BY u.o), '[]')
              FROM queen.ack_typed(p_tenant, a_txid, a_pid, a_grp, a_status, a_lease, a_err,
                                   p_txn) r,
                   unnest(r.ok, r.err, r.qname, r.pname, r.released, r.dlq)
                       WITH ORDINALITY AS u(ok, err, qname, pname, rel, dlq, o));
END $$;

-- ---------------------------------------------------------------------------
-- queen.ack_typed(tenant, txid[], pid[], grp[], status[], lease[], err[], txn)
--   The items of queen.ack_items as parallel arrays, already normalised: pid and
--   lease NULL when not a uuid, grp '__QUEUE_MODE__' when none, status lower case
--   ('completed' when none). The broker calls this with binary arrays
--   (src/store/ack_fused.rs): no jsonb to read and no uuid regex per item, which
--   were a third of an ack/batch of 100 in PostgreSQL.
--   out: per item i (aligned with the inputs) ok[i] (success), err[i],
--        qname[i], pname[i], released[i] (leaseReleased), dlq[i]: ack_items's
--        answer without the echoed transactionId/partitionId, which the caller
--        has (no jsonb object per item to build, send and parse again).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.ack_typed(p_tenant uuid, a_txid text[], a_pid uuid[],
    a_grp text[], a_status text[], a_lease uuid[], a_err text[], p_txn boolean,
    OUT ok boolean[], OUT err text[], OUT qname text[], OUT pname text[],
    OUT released boolean[], OUT dlq boolean[])
LANGUAGE plpgsql
-- Every read below is a key probe. While queen.messages is young (a new
-- database, or one retention just emptied) the planner finds a scan of the
-- whole table cheaper than one probe per item, and a session keeps that
-- plan until the table is next analysed: every ack then read the whole
-- table (issue 18: 0.84 ms an ack at 1,000 msg/s, all of it that scan).
SET enable_seqscan = off
AS $$
DECLARE
    v_n        int := coalesce(cardinality(a_txid), 0);
    it         record;
    v_pc       record;
    v_found    boolean;
    v_consumed boolean;
    v_has_lease boolean;
    v_release  boolean;
    v_dlq      boolean;
    v_err      text;
    v_status   text;
    v_now      timestamptz := now();
    v_released text[] := '{}';   -- (partition|group|lease) released by this call
    v_done     int[];            -- items answered by the set-based pass
    f_q        text[];           -- their answers, in item order
    f_p        text[];
    f_rel      boolean[];
    f          record;
BEGIN
    ok := '{}'; err := '{}'; qname := '{}'; pname := '{}'; released := '{}'; dlq := '{}';
    IF v_n = 0 THEN
        RETURN;
    END IF;
    p_tenant := coalesce(p_tenant, '00000000-0000-0000-0000-000000000001');

    -- serialise per (partition, group): blocking advisory locks in a fixed order,
    -- taken row by row of the sorted keys (one statement)
    PERFORM pg_advisory_xact_lock(k.key)
       FROM (SELECT DISTINCT queen.lock_key(u.pid, u.grp) AS key
               FROM unnest(a_pid, a_grp) AS u(pid, grp)
              WHERE u.pid IS NOT NULL
              ORDER BY 1) k;

    -- set-based pass (see the head of this file), answered in one aggregate
    WITH i AS (
        SELECT u.ord::int AS ord, u.txid, u.pid, u.grp, u.status, u.lease
          FROM unnest(a_txid, a_pid, a_grp, a_status, a_lease)
               WITH ORDINALITY AS u(txid, pid, grp, status, lease, ord)
         WHERE u.pid IS NOT NULL
    ), r AS (
        SELECT i.*, m.id AS mid, m.created_at AS mts
          FROM i
          LEFT JOIN queen.messages m ON m.partition_id = i.pid AND m.transaction_id = i.txid
    ), g AS (
        SELECT r.pid, r.grp, count(*) AS n, count(DISTINCT r.mid) AS nd,
               bool_and(r.mid IS NOT NULL AND r.status IN ('completed', 'success')
                        AND r.lease IS NOT NULL) AS ok,
               count(DISTINCT r.lease) AS nl, (array_agg(r.lease))[1] AS lease,
               min(r.mts) AS first_ts,
               (array_agg(r.mid ORDER BY r.mts, r.mid))[1] AS first_id,
               max(r.mts) AS last_ts,
               (array_agg(r.mid ORDER BY r.mts DESC, r.mid DESC))[1] AS last_id
          FROM r GROUP BY r.pid, r.grp
    ), c AS (
        SELECT g.*, pt.name AS pname, q.name AS qname
          FROM g
          JOIN queen.partitions pt ON pt.id = g.pid
          JOIN queen.queues q ON q.id = pt.queue_id AND q.tenant_id = p_tenant
         WHERE g.ok AND g.nd = g.n AND g.nl = 1
    ), u AS (
        -- the lease, batch and cursor checks are on the updated row itself: a second
        -- join of partition_consumers here once probed it by consumer group, a scan of
        -- every partition of the group per (partition, group) when the plan was made
        -- on a small table (issue 18: 3.7 ms per partition at 10,000 partitions)
        UPDATE queen.partition_consumers x SET
            last_consumed_id = c.last_id,
            last_consumed_created_at = c.last_ts,
            last_consumed_at = v_now,
            total_messages_consumed = x.total_messages_consumed + c.n,
            total_batches_consumed = x.total_batches_consumed
                + CASE WHEN x.acked_count + c.n >= x.batch_size THEN 1 ELSE 0 END,
            acked_count = x.acked_count + c.n,
            worker_id = CASE WHEN x.acked_count + c.n >= x.batch_size THEN NULL
                             ELSE x.worker_id END,
            lease_expires_at = CASE WHEN x.acked_count + c.n >= x.batch_size THEN NULL
                                    ELSE x.lease_expires_at END,
            lease_acquired_at = CASE WHEN x.acked_count + c.n >= x.batch_size THEN NULL
                                     ELSE x.lease_acquired_at END,
            batch_retry_count = CASE WHEN x.acked_count + c.n >= x.batch_size THEN 0
                                     ELSE x.batch_retry_count END,
            -- still leased: behind (sql/schema/012_hot_leases.sql)
            behind = x.acked_count + c.n < x.batch_size
                     OR EXISTS (SELECT 1 FROM queen.partition_lookup pl
                              WHERE pl.partition_id = c.pid
                                AND (pl.last_message_created_at, pl.last_message_id)
                                    > (c.last_ts, c.last_id))
          FROM c
         WHERE x.partition_id = c.pid AND x.consumer_group = c.grp
           AND x.worker_id = c.lease AND x.lease_expires_at > v_now
           AND x.acked_count + c.n <= x.batch_size
           AND (x.last_consumed_created_at IS NULL
                OR (c.first_ts, c.first_id) > (x.last_consumed_created_at, x.last_consumed_id))
        RETURNING x.partition_id AS pid, x.consumer_group AS grp,
                  x.worker_id IS NULL AS released, c.qname, c.pname, c.last_id
    )
    SELECT array_agg(a.ord), array_agg(a.qname), array_agg(a.pname), array_agg(a.rel)
      INTO v_done, f_q, f_p, f_rel
      FROM (SELECT r.ord, u.qname, u.pname, u.released AND r.mid = u.last_id AS rel
              FROM u JOIN r ON r.pid = u.pid AND r.grp = u.grp
             ORDER BY r.ord) a;

    -- the common ack/batch: every item answered by the set-based pass
    IF cardinality(v_done) = v_n THEN
        ok := array_fill(true, ARRAY[v_n]);
        err := array_fill(NULL::text, ARRAY[v_n]);
        qname := f_q;
        pname := f_p;
        released := f_rel;
        dlq := array_fill(false, ARRAY[v_n]);
        RETURN;
    END IF;
    ok := array_fill(NULL::boolean, ARRAY[v_n]);
    err := array_fill(NULL::text, ARRAY[v_n]);
    qname := array_fill(NULL::text, ARRAY[v_n]);
    pname := array_fill(NULL::text, ARRAY[v_n]);
    released := array_fill(NULL::boolean, ARRAY[v_n]);
    dlq := array_fill(NULL::boolean, ARRAY[v_n]);
    v_done := coalesce(v_done, '{}');
    FOR i IN 1 .. coalesce(cardinality(v_done), 0) LOOP
        ok[v_done[i]] := true;
        qname[v_done[i]] := f_q[i];
        pname[v_done[i]] := f_p[i];
        released[v_done[i]] := f_rel[i];
        dlq[v_done[i]] := false;
    END LOOP;

    -- items in message position order (unknown messages first, they change nothing)
    FOR it IN
        SELECT i.ord, i.txid, i.pid, i.grp, i.status, i.lease, i.err,
               m.id AS mid, m.created_at AS mts, q.name AS qname, pt.name AS pname,
               q.retry_limit
          FROM (SELECT u.ord::int AS ord, u.txid, u.pid, u.grp, u.status, u.lease, u.err
                  FROM unnest(a_txid, a_pid, a_grp, a_status, a_lease, a_err)
                       WITH ORDINALITY AS u(txid, pid, grp, status, lease, err, ord)
                 WHERE NOT (u.ord::int = ANY (v_done))) i
          -- only the caller's tenant's partitions: another tenant's answers as none
          LEFT JOIN (queen.partitions pt
                     JOIN queen.queues q ON q.id = pt.queue_id AND q.tenant_id = p_tenant)
                 ON pt.id = i.pid
          LEFT JOIN queen.messages m ON m.partition_id = i.pid AND m.transaction_id = i.txid
                                    AND q.id IS NOT NULL
         ORDER BY (m.id IS NOT NULL), i.pid, i.grp, m.created_at, m.id, i.ord
    LOOP
        IF it.mid IS NULL THEN
            ok[it.ord] := false;
            err[it.ord] := 'Message not found';
            qname[it.ord] := it.qname;
            pname[it.ord] := it.pname;
            released[it.ord] := false;
            dlq[it.ord] := false;
            CONTINUE;
        END IF;

        SELECT x.* INTO v_pc FROM queen.partition_consumers x
         WHERE x.partition_id = it.pid AND x.consumer_group = it.grp;
        v_found := FOUND;
        v_consumed := v_found AND v_pc.last_consumed_created_at IS NOT NULL
                      AND (it.mts, it.mid) <= (v_pc.last_consumed_created_at, v_pc.last_consumed_id);
        v_has_lease := v_found AND v_pc.worker_id IS NOT NULL;
        v_release := false;
        v_dlq := false;
        v_err := NULL;
        v_status := it.status;

        IF v_consumed THEN
            -- already past the cursor: idempotent success, nothing changes
            NULL;
        ELSIF it.lease IS NOT NULL
              AND NOT (v_found AND v_pc.worker_id = it.lease AND v_pc.lease_expires_at > v_now) THEN
            IF it.status IN ('failed', 'retry')
               AND (it.pid::text || '|' || it.grp || '|' || it.lease::text) = ANY (v_released) THEN
                -- the lease was released by an earlier failed/retry item of this call:
                -- the batch is already up for redelivery, nothing more to do
                NULL;
            ELSE
                v_err := 'Invalid or expired lease';
            END IF;
        ELSIF v_status NOT IN ('completed', 'success', 'failed', 'dlq', 'retry') THEN
            v_err := 'Invalid status: ' || v_status;
        ELSE
            IF NOT v_found THEN
                INSERT INTO queen.partition_consumers (partition_id, consumer_group)
                VALUES (it.pid, it.grp) ON CONFLICT (partition_id, consumer_group) DO NOTHING;
                SELECT x.* INTO v_pc FROM queen.partition_consumers x
                 WHERE x.partition_id = it.pid AND x.consumer_group = it.grp;
            END IF;

            IF v_status = 'failed' AND NOT p_txn
               AND v_pc.batch_retry_count < coalesce(it.retry_limit, 3) THEN
                -- retries left: release once per failed delivery (no lease = nothing to do)
                IF v_has_lease THEN
                    UPDATE queen.partition_consumers SET
                        worker_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
                        batch_retry_count = batch_retry_count + 1,
                        behind = true
                     WHERE partition_id = it.pid AND consumer_group = it.grp;
                    v_release := true;
                END IF;
            ELSIF v_status = 'retry' THEN
                IF v_has_lease THEN
                    UPDATE queen.partition_consumers SET
                        worker_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
                        behind = true
                     WHERE partition_id = it.pid AND consumer_group = it.grp;
                    v_release := true;
                END IF;
            ELSIF v_status = 'failed' AND NOT p_txn AND NOT v_has_lease THEN
                -- retries exhausted but no lease present: a later failed ack of an
                -- already released batch changes nothing
                NULL;
            ELSE
                -- completed/success, or dead-letter (dlq, exhausted failed, txn failed)
                IF v_status IN ('failed', 'dlq') THEN
                    v_dlq := true;
                    INSERT INTO queen.dead_letter_queue AS d
                           (message_id, partition_id, consumer_group, error_message,
                            retry_count, original_created_at, failed_at)
                    VALUES (it.mid, it.pid, it.grp,
                            coalesce(it.err, CASE WHEN p_txn OR v_status = 'dlq' THEN 'Unknown error'
                                                  ELSE 'Retries exhausted' END),
                            v_pc.batch_retry_count, it.mts, v_now)
                    ON CONFLICT (message_id, consumer_group) DO UPDATE SET
                        error_message = EXCLUDED.error_message,
                        retry_count = EXCLUDED.retry_count,
                        failed_at = EXCLUDED.failed_at;
                END IF;
                v_release := v_has_lease AND v_pc.acked_count + 1 >= v_pc.batch_size;
                UPDATE queen.partition_consumers SET
                    last_consumed_id = it.mid,
                    last_consumed_created_at = it.mts,
                    last_consumed_at = v_now,
                    total_messages_consumed = total_messages_consumed
                                              + CASE WHEN v_dlq THEN 0 ELSE 1 END,
                    total_batches_consumed = total_batches_consumed
                                             + CASE WHEN v_release THEN 1 ELSE 0 END,
                    acked_count = CASE WHEN v_has_lease THEN acked_count + 1 ELSE acked_count END,
                    worker_id = CASE WHEN v_release THEN NULL ELSE worker_id END,
                    lease_expires_at = CASE WHEN v_release THEN NULL ELSE lease_expires_at END,
                    lease_acquired_at = CASE WHEN v_release THEN NULL ELSE lease_acquired_at END,
                    batch_retry_count = CASE WHEN v_release THEN 0 ELSE batch_retry_count END,
                    behind = (worker_id IS NOT NULL AND NOT v_release)
                             OR EXISTS (SELECT 1 FROM queen.partition_lookup pl
                                      WHERE pl.partition_id = it.pid
                                        AND (pl.last_message_created_at, pl.last_message_id) > (it.mts, it.mid))
                 WHERE partition_id = it.pid AND consumer_group = it.grp;
            END IF;
        END IF;

        IF v_release AND v_has_lease THEN
            v_released := v_released || (it.pid::text || '|' || it.grp || '|' || v_pc.worker_id::text);
        END IF;
        ok[it.ord] := v_err IS NULL;
        err[it.ord] := v_err;
        qname[it.ord] := it.qname;
        pname[it.ord] := it.pname;
        released[it.ord] := v_release;
        dlq[it.ord] := v_dlq;
    END LOOP;
END $$;
