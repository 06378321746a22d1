-- Queue configuration and push: the jsonb push (transactions, the spool) and the typed-array push of the push lanes.

-- Queue configuration and push.

-- ---------------------------------------------------------------------------
-- queen.queue_options_json(queue row) -> the §2 options object
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.queue_options_json(q queen.queues) RETURNS jsonb
LANGUAGE sql STABLE AS $$
SELECT jsonb_build_object(
    'leaseTime', q.lease_time,
    'retryLimit', q.retry_limit,
    'retryDelay', q.retry_delay,
    'maxSize', q.max_queue_size,
    'ttl', q.ttl,
    'deadLetterQueue', q.dead_letter_queue,
    'dlqAfterMaxRetries', q.dlq_after_max_retries,
    'priority', q.priority,
    'delayedProcessing', q.delayed_processing,
    'windowBuffer', q.window_buffer,
    'retentionSeconds', q.retention_seconds,
    'completedRetentionSeconds', q.completed_retention_seconds,
    'retentionEnabled', q.retention_enabled,
    'encryptionEnabled', q.encryption_enabled,
    'maxWaitTimeSeconds', q.max_wait_time_seconds)
$$;

-- Ensure a partition (and its partition_lookup row) exists; race-free. Returns its id.
CREATE OR REPLACE FUNCTION queen.ensure_partition(p_queue_id uuid, p_name text) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    SELECT id INTO v_id FROM queen.partitions WHERE queue_id = p_queue_id AND name = p_name;
    IF v_id IS NULL THEN
        INSERT INTO queen.partitions (queue_id, name) VALUES (p_queue_id, p_name)
        ON CONFLICT (queue_id, name) DO NOTHING;
        SELECT id INTO v_id FROM queen.partitions WHERE queue_id = p_queue_id AND name = p_name;
    END IF;
    INSERT INTO queen.partition_lookup (partition_id, queue_id) VALUES (v_id, p_queue_id)
    ON CONFLICT (partition_id) DO NOTHING;
    RETURN v_id;
END $$;

-- Create what is missing of the given (queue, partition) pairs: queues, partitions and
-- their partition_lookup rows, each ON CONFLICT DO NOTHING and in a fixed order, so
-- concurrent creators of the same pairs neither fail nor deadlock. Shared by the two
-- pushes; the caller then resolves and locks the pairs again.
CREATE OR REPLACE FUNCTION queen.create_pairs(p_tenant uuid, p_qn text[], p_pn text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.queues (tenant_id, name, namespace, task)
    SELECT p_tenant, s.qn,
           CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 1), '') END,
           CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 2), '') END
    FROM (SELECT DISTINCT qn FROM unnest(p_qn) AS u(qn)) s
    WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.tenant_id = p_tenant AND q.name = s.qn)
    ORDER BY s.qn
    ON CONFLICT (tenant_id, name) DO NOTHING;

    INSERT INTO queen.partitions (queue_id, name)
    SELECT q.id, s.pn
    FROM unnest(p_qn, p_pn) AS s(qn, pn)
    JOIN queen.queues q ON q.tenant_id = p_tenant AND q.name = s.qn
    WHERE NOT EXISTS (SELECT 1 FROM queen.partitions x WHERE x.queue_id = q.id AND x.name = s.pn)
    ORDER BY q.id, s.pn
    ON CONFLICT (queue_id, name) DO NOTHING;

    INSERT INTO queen.partition_lookup (partition_id, queue_id)
    SELECT pt.id, pt.queue_id
    FROM unnest(p_qn, p_pn) AS s(qn, pn)
    JOIN queen.queues q ON q.tenant_id = p_tenant AND q.name = s.qn
    JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
    WHERE NOT EXISTS (SELECT 1 FROM queen.partition_lookup x WHERE x.partition_id = pt.id)
    ORDER BY pt.id
    ON CONFLICT (partition_id) DO NOTHING;
END $$;

-- ---------------------------------------------------------------------------
-- queen.configure(p)
--   in : {tenant, queue, namespace|null, task|null, options:{camelCase, any subset},
--         mode:"merge"|"replace"}
--   out: {configured:true, queueId, partitionId, queue, namespace, task, options:{...}}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.configure(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant  uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_name    text := coalesce(p->>'queue', '');
    v_ns      text := p->>'namespace';
    v_task    text := p->>'task';
    o         jsonb := coalesce(nullif(p->'options', 'null'::jsonb), '{}'::jsonb);
    v_replace boolean := coalesce(p->>'mode', 'merge') = 'replace';
    q         queen.queues;
    v_pid     uuid;
BEGIN
    -- create with defaults when missing (race-free), then update from the options
    INSERT INTO queen.queues (tenant_id, name, namespace, task)
    VALUES (v_tenant, v_name, v_ns, v_task)
    ON CONFLICT (tenant_id, name) DO NOTHING;

    UPDATE queen.queues x SET
        namespace = coalesce(v_ns, x.namespace),
        task      = coalesce(v_task, x.task),
        lease_time = coalesce((o->>'leaseTime')::numeric::int,
                              CASE WHEN v_replace THEN 300 ELSE x.lease_time END),
        retry_limit = coalesce((o->>'retryLimit')::numeric::int,
                               CASE WHEN v_replace THEN 3 ELSE x.retry_limit END),
        retry_delay = coalesce((o->>'retryDelay')::numeric::int,
                               CASE WHEN v_replace THEN 1000 ELSE x.retry_delay END),
        max_queue_size = coalesce((o->>'maxSize')::numeric::int,
                                  CASE WHEN v_replace THEN 0 ELSE x.max_queue_size END),
        ttl = coalesce((o->>'ttl')::numeric::int,
                       CASE WHEN v_replace THEN 3600 ELSE x.ttl END),
        dead_letter_queue = coalesce((o->>'deadLetterQueue')::boolean,
                                     CASE WHEN v_replace THEN false ELSE x.dead_letter_queue END),
        dlq_after_max_retries = coalesce((o->>'dlqAfterMaxRetries')::boolean,
                                         CASE WHEN v_replace THEN false ELSE x.dlq_after_max_retries END),
        priority = coalesce((o->>'priority')::numeric::int,
                            CASE WHEN v_replace THEN 0 ELSE x.priority END),
        delayed_processing = coalesce((o->>'delayedProcessing')::numeric::int,
                                      CASE WHEN v_replace THEN 0 ELSE x.delayed_processing END),
        window_buffer = coalesce((o->>'windowBuffer')::numeric::int,
                                 CASE WHEN v_replace THEN 0 ELSE x.window_buffer END),
        retention_seconds = coalesce((o->>'retentionSeconds')::numeric::int,
                                     CASE WHEN v_replace THEN 0 ELSE x.retention_seconds END),
        completed_retention_seconds = coalesce((o->>'completedRetentionSeconds')::numeric::int,
                                     CASE WHEN v_replace THEN 0 ELSE x.completed_retention_seconds END),
        retention_enabled = coalesce((o->>'retentionEnabled')::boolean,
                                     CASE WHEN v_replace THEN false ELSE x.retention_enabled END),
        encryption_enabled = coalesce((o->>'encryptionEnabled')::boolean,
                                      CASE WHEN v_replace THEN false ELSE x.encryption_enabled END),
        max_wait_time_seconds = coalesce((o->>'maxWaitTimeSeconds')::numeric::int,
                                         CASE WHEN v_replace THEN 0 ELSE x.max_wait_time_seconds END),
        dedup_window_seconds = coalesce((o->>'dedupWindowSeconds')::numeric::int,
                                        CASE WHEN v_replace THEN 3600 ELSE x.dedup_window_seconds END),
        updated_at = now()
    WHERE x.tenant_id = v_tenant AND x.name = v_name
    RETURNING x.* INTO q;

    v_pid := queen.ensure_partition(q.id, 'Default');

    RETURN jsonb_build_object(
        'configured', true,
        'queueId', q.id,
        'partitionId', v_pid,
        'queue', q.name,
        'namespace', q.namespace,
        'task', q.task,
        'options', queen.queue_options_json(q));
END $$;

-- ---------------------------------------------------------------------------
-- queen.push_items(tenant, items) -- set-based push, shared by push_batch and transaction
--   items: [{queue, partition, id, txid, traceId|null, payload, encrypted, sub|null}]
--   returns a jsonb array aligned with items:
--     {message_id, status:"queued"|"duplicate", partition_id, queue_id, trace_id,
--      transaction_id}
-- Append-order invariant: the partition_lookup rows of every touched partition are
-- locked FOR NO KEY UPDATE in partition-id order, then created_at is stamped with
-- greatest(clock_timestamp(), last_message_created_at + 1us) read AFTER the lock.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.push_items(p_tenant uuid, p_items jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    a_pair  int[];    -- per item (request order): index into the pair arrays
    -- distinct (queue, partition) pairs
    v_qn    text[];
    v_pn    text[];
    v_qid   uuid[];
    v_pid   uuid[];
    -- locked partitions with their stamp
    v_lpid  uuid[];
    v_lts   timestamptz[];
    v_missing int;
    v_locked  int;
    v_ins_id  uuid[];
    v_res   jsonb;
BEGIN
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) = 0 THEN
        RETURN '[]'::jsonb;
    END IF;
    p_tenant := coalesce(p_tenant, '00000000-0000-0000-0000-000000000001');

    -- distinct (queue, partition) pairs, and per item the index of its pair.
    -- Items are read with jsonb_array_elements + ->> in each statement (cheap); the
    -- jsonb_to_recordset path re-parses jsonb columns through text and is much slower,
    -- and big per-item arrays in plpgsql variables cost more than re-reading p_items.
    WITH it AS (
        SELECT e.v->>'queue' AS qn, coalesce(e.v->>'partition', 'Default') AS pn, e.ord
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(v, ord)
    ), pairs AS (
        SELECT d.qn, d.pn, (row_number() OVER (ORDER BY d.qn, d.pn))::int AS k
          FROM (SELECT DISTINCT it.qn, it.pn FROM it) d
    )
    SELECT (SELECT array_agg(pairs.qn ORDER BY pairs.k) FROM pairs),
           (SELECT array_agg(pairs.pn ORDER BY pairs.k) FROM pairs),
           (SELECT array_agg(pairs.k ORDER BY it.ord) FROM it JOIN pairs USING (qn, pn))
      INTO v_qn, v_pn, a_pair;

    -- resolve; create what is missing (race-free) and resolve again
    FOR attempt IN 1..4 LOOP
        SELECT array_agg(q.id ORDER BY s.ord), array_agg(pt.id ORDER BY s.ord),
               count(*) FILTER (WHERE pt.id IS NULL OR pl.partition_id IS NULL)
          INTO v_qid, v_pid, v_missing
        FROM unnest(v_qn, v_pn) WITH ORDINALITY AS s(qn, pn, ord)
        LEFT JOIN queen.queues q ON q.tenant_id = p_tenant AND q.name = s.qn
        LEFT JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
        LEFT JOIN queen.partition_lookup pl ON pl.partition_id = pt.id;
        IF v_missing = 0 THEN
            -- serialise appends per partition: lock in partition-id order. Holding these
            -- locks also keeps the partitions alive (a delete cascades to the lookup row
            -- and waits), so messages can never be orphaned. A row that vanished meanwhile
            -- (concurrent DELETE FROM queues) is re-created on the next round.
            WITH l AS (
                SELECT 1 FROM queen.partition_lookup
                 WHERE partition_id = ANY (v_pid)
                 ORDER BY partition_id
                 FOR NO KEY UPDATE)
            SELECT count(*) INTO v_locked FROM l;
            EXIT WHEN v_locked = cardinality(v_pid);
        END IF;
        IF attempt = 4 THEN
            RAISE EXCEPTION 'push: could not create queue/partition (concurrent delete?)';
        END IF;

        PERFORM queen.create_pairs(p_tenant, v_qn, v_pn);
    END LOOP;


    -- stamp AFTER the lock (new statement = fresh snapshot: sees the previous holder's row)
    SELECT array_agg(pl.partition_id),
           array_agg(greatest(clock_timestamp(),
                              coalesce(pl.last_message_created_at + interval '1 microsecond', '-infinity')))
      INTO v_lpid, v_lts
    FROM queen.partition_lookup pl
    WHERE pl.partition_id = ANY (v_pid);

    -- insert (first occurrence of a txid in a partition wins), then move each touched
    -- partition's "newest message" forward and its last_activity, in one statement
    WITH it AS (
        SELECT (e.v->>'id')::uuid AS id,
               e.v->>'txid' AS txid,
               (e.v->>'traceId')::uuid AS trace,
               coalesce(e.v->'payload', 'null'::jsonb) AS pay,
               coalesce((e.v->>'encrypted')::boolean, false) AS enc,
               e.v->>'sub' AS sub,
               e.ord,
               v_pid[a_pair[e.ord::int]] AS pid
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(v, ord)
    ), ins AS (
        INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                    created_at, is_encrypted, producer_sub)
        SELECT DISTINCT ON (it.pid, it.txid)
               it.id, it.txid, it.trace, it.pid, it.pay, st.ts, it.enc, it.sub
        FROM it JOIN unnest(v_lpid, v_lts) AS st(pid, ts) ON st.pid = it.pid
        ORDER BY it.pid, it.txid, it.ord
        ON CONFLICT DO NOTHING
        RETURNING id, partition_id, created_at
    ), last AS (
        SELECT ins.partition_id AS pid, max(ins.created_at) AS last_ts,
               (array_agg(ins.id ORDER BY ins.created_at DESC, ins.id DESC))[1] AS last_id
          FROM ins GROUP BY ins.partition_id
    ), upl AS (
        UPDATE queen.partition_lookup pl
           SET last_message_id = last.last_id,
               last_message_created_at = last.last_ts,
               updated_at = now()
          FROM last
         WHERE pl.partition_id = last.pid
           AND (pl.last_message_created_at IS NULL
                OR (pl.last_message_created_at, pl.last_message_id) < (last.last_ts, last.last_id))
        RETURNING 1
    ), upt AS (
        UPDATE queen.partitions pt SET last_activity = now()
          FROM last WHERE pt.id = last.pid
        RETURNING 1
    )
    SELECT (SELECT array_agg(ins.id) FROM ins),
           (SELECT count(*) FROM upl) + (SELECT count(*) FROM upt)
      INTO v_ins_id, v_missing;

    -- results. Inserted items are queued with their own id; for the others the existing
    -- row is looked up in this separate statement (fresh snapshot: a concurrent winner's
    -- row is visible now).
    SELECT jsonb_agg(jsonb_build_object(
               'message_id', CASE WHEN r.inserted THEN r.id
                                  ELSE (SELECT m.id FROM queen.messages m
                                         WHERE m.partition_id = r.pid AND m.transaction_id = r.txid) END,
               'status', CASE WHEN r.inserted THEN 'queued' ELSE 'duplicate' END,
               'partition_id', r.pid,
               'queue_id', v_qid[r.k],
               'trace_id', r.trace,
               'transaction_id', r.txid)
             ORDER BY r.ord)
      INTO v_res
    FROM (SELECT u.*, a_pair[u.ord::int] AS k, v_pid[a_pair[u.ord::int]] AS pid,
                 (ins.id IS NOT NULL) AS inserted
            FROM (SELECT (e.v->>'id')::uuid AS id, e.v->>'txid' AS txid,
                         (e.v->>'traceId')::uuid AS trace, e.ord
                    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(v, ord)) u
            LEFT JOIN unnest(v_ins_id) AS ins(id) ON ins.id = u.id) r;

    RETURN coalesce(v_res, '[]'::jsonb);
END $$;

-- ---------------------------------------------------------------------------
-- queen.push_batch(p)
--   in : {tenant, items:[{queue, partition, id, txid, traceId|null, payload, encrypted, sub|null}]}
--   out: [{message_id, status, partition_id, queue_id, trace_id, transaction_id}]
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.push_batch(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    RETURN queen.push_items(queen.try_uuid(p->>'tenant'), p->'items');
END $$;

-- queen.push_typed: the push lanes' batch (src/store/push_typed.rs), typed arrays in,
-- compact answer out. Same answers, locks, append order and dedup as push_items
-- (described above). The broker sends each distinct (queue, partition) pair once
-- (p_qn, p_pn; pairs are distinct) and per item the 1-based index of its pair (p_pair).
--
-- Where PostgreSQL's time goes (issue 18; perf and pg_stat_statements track=all on
-- the 2-core box, 8 clients, fused calls of 6 requests over 1,000 partitions; per call
-- of 600 items the INSERT is ~88% of the function, the rest below):
--  * the INSERT. With ON CONFLICT every row first probes the arbiter index
--    (ExecCheckIndexConstraints, 13% of PostgreSQL's CPU), takes and releases a
--    speculative-insertion lock and writes a confirm WAL record (5 records a row, 4
--    without). Duplicates are rare (client retries, spool replays), and every
--    insert into a partition holds its lookup row lock, so nothing can race us:
--    the plain INSERT runs first, in a block that catches unique_violation, and
--    only a batch that holds a duplicate is inserted again with the arbiter.
--    A primary-key clash that is not a (partition, transaction id) duplicate
--    still raises, from the second INSERT.
--  * planning: the plan cache kept choosing custom plans for the check and the
--    bookkeeping statements (their generic estimates look worse), so they were
--    planned on every call (0.1-0.2 ms each). The function forces generic plans;
--    every statement below is an index probe per pair or per item whatever the
--    array sizes.
--  * the bookkeeping UPDATEs joined a CTE estimated at 100 rows and were planned
--    as a sequential scan of partition_lookup and of partitions (all queues'
--    partitions, every call: 15 ms at 15,000 partitions). They now probe the
--    primary keys with = ANY (pids).
--  * the check and the lock were two near-identical 3-way joins (~5 buffers per pair
--    each). Now the lock runs alone, inside the INSERT's subtransaction: a missing
--    pair is raised out of it, which releases the rows locked so far, so no lookup
--    row is held while a partition is being created (creation may wait on a
--    concurrent creator: holding locks there could deadlock a creation race).
-- All of it together, PostgreSQL core-us per message before -> after (a client
-- calling this function as the broker does, 8 connections, 6 pairs per call, shared
-- box, 2 interleaved rounds): 6x100 items 12.9 -> 11.2, 6x10 29 -> 22.5, 6x1 170 -> 132.
-- Through the broker (queen-bench push c50 p1000, main's binary with this function, one
-- run each, shared box): b100 15.2 and 14.5 -> 11.3 and 12.4, b10 30.1 -> 21.4, b1 168 -> 120;
-- WAL records per pushed row 5.1 -> 4.0.
--
-- Answers: pids (and qids) per pair; dup_ord/dup_id the 1-based items not inserted
-- and the message holding their transaction id. Append order (semantics.md §3): the
-- lookup rows are locked in partition-id order, then each pair is stamped
-- greatest(clock_timestamp(), newest + 1us), read after the lock.
CREATE OR REPLACE FUNCTION queen.push_typed(
    p_tenant uuid, p_qn text[], p_pn text[], p_pair int[], p_id uuid[], p_txid text[],
    p_trace uuid[], p_payload jsonb[], p_enc boolean[], p_sub text[],
    OUT pids uuid[], OUT qids uuid[], OUT dup_ord int[], OUT dup_id uuid[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_tenant  uuid := coalesce(p_tenant, '00000000-0000-0000-0000-000000000001');
    v_n       int := coalesce(cardinality(p_id), 0);
    v_ts      timestamptz[];
    v_missing int;
    v_locked  int;
    v_ins     int;
    v_skip    int[];  -- items not inserted by this call (duplicates and replays)
    v_arbiter boolean := false;  -- insert with ON CONFLICT (the batch holds a duplicate)
    v_created int := 0;          -- creation rounds so far
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;

    -- Lock, stamp and insert in one subtransaction. A missing pair (first push to a
    -- partition, or one deleted meanwhile) is raised out of it, which releases the
    -- lookup rows locked so far: no lookup row is held while partitions are being
    -- created (creation may wait on a concurrent creator). A duplicate transaction
    -- id is raised out of it too, and the batch runs again with the arbiter.
    FOR attempt IN 1..6 LOOP
        BEGIN
            -- serialise appends per partition (lock in partition-id order) and stamp
            -- from the newest committed version of each locked row
            WITH l AS (
                SELECT s.ord, pl.partition_id AS pid, pl.queue_id AS qid,
                       pl.last_message_created_at AS last_ts
                  FROM unnest(p_qn, p_pn) WITH ORDINALITY AS s(qn, pn, ord)
                  JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
                  JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
                  JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
                 ORDER BY pl.partition_id
                 FOR NO KEY UPDATE OF pl)
            SELECT count(*), array_agg(l.pid ORDER BY l.ord), array_agg(l.qid ORDER BY l.ord),
                   array_agg(greatest(clock_timestamp(),
                                      coalesce(l.last_ts + interval '1 microsecond', '-infinity'))
                             ORDER BY l.ord)
              INTO v_locked, pids, qids, v_ts
              FROM l;
            IF v_locked < cardinality(p_qn) THEN
                RAISE EXCEPTION USING ERRCODE = 'QP001';  -- caught below: create
            END IF;

            -- insert in item order; plain INSERT unless this batch held a duplicate
            IF NOT v_arbiter THEN
                INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                            created_at, is_encrypted, producer_sub)
                SELECT u.id, u.txid, u.trace, pids[u.k], coalesce(u.payload, 'null'::jsonb),
                       v_ts[u.k], coalesce(u.enc, false), u.sub
                  FROM unnest(p_pair, p_id, p_txid, p_trace, p_payload, p_enc, p_sub)
                       WITH ORDINALITY AS u(k, id, txid, trace, payload, enc, sub, ord)
                 ORDER BY u.ord;
                v_ins := v_n;
            ELSE
                -- the first occurrence of a transaction id in a partition wins
                INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                            created_at, is_encrypted, producer_sub)
                SELECT u.id, u.txid, u.trace, pids[u.k], coalesce(u.payload, 'null'::jsonb),
                       v_ts[u.k], coalesce(u.enc, false), u.sub
                  FROM unnest(p_pair, p_id, p_txid, p_trace, p_payload, p_enc, p_sub)
                       WITH ORDINALITY AS u(k, id, txid, trace, payload, enc, sub, ord)
                 ORDER BY u.ord
                ON CONFLICT (partition_id, transaction_id) DO NOTHING;
                GET DIAGNOSTICS v_ins = ROW_COUNT;
            END IF;
            EXIT;
        EXCEPTION
            WHEN unique_violation THEN
                IF v_arbiter THEN
                    RAISE;  -- not a (partition, transaction id) duplicate: a primary-key clash
                END IF;
                v_arbiter := true;
            WHEN SQLSTATE 'QP001' THEN
                IF v_created >= 4 THEN
                    RAISE EXCEPTION 'push: could not create queue/partition (concurrent delete?)';
                END IF;
                v_created := v_created + 1;

                PERFORM queen.create_pairs(v_tenant, p_qn, p_pn);
        END;
    END LOOP;
    IF v_ins IS NULL THEN
        RAISE EXCEPTION 'push: could not create queue/partition (concurrent delete?)';
    END IF;

    -- duplicates only when the INSERT skipped something (fresh snapshot: a concurrent
    -- winner's row is visible now, and so is an earlier item of this same call). An
    -- item whose own id is already stored (a spool replay of a committed batch) is
    -- answered as stored, as before, but it was not inserted now: its row carries an
    -- older stamp than v_ts, and it must not move the newest-message pointer.
    IF v_ins < v_n THEN
        SELECT array_agg(u.ord::int ORDER BY u.ord) FILTER (WHERE m.id IS DISTINCT FROM u.id),
               array_agg(m.id ORDER BY u.ord) FILTER (WHERE m.id IS DISTINCT FROM u.id),
               array_agg(u.ord::int)
                   FILTER (WHERE m.id IS DISTINCT FROM u.id
                              OR m.created_at IS DISTINCT FROM v_ts[u.k])
          INTO dup_ord, dup_id, v_skip
          FROM unnest(p_pair, p_id, p_txid) WITH ORDINALITY AS u(k, id, txid, ord)
          LEFT JOIN queen.messages m
            ON m.partition_id = pids[u.k] AND m.transaction_id = u.txid;
    END IF;

    -- move each touched partition's newest message forward (items inserted now only).
    -- "= ANY (pids)" makes both UPDATEs primary-key probes (see above).
    WITH last AS MATERIALIZED (
        SELECT pids[u.k] AS pid, v_ts[u.k] AS last_ts,
               (array_agg(u.id ORDER BY u.id DESC))[1] AS last_id
          FROM unnest(p_pair, p_id) WITH ORDINALITY AS u(k, id, ord)
         WHERE v_skip IS NULL OR u.ord <> ALL (v_skip)
         GROUP BY u.k
    ), upl AS (
        UPDATE queen.partition_lookup pl
           SET last_message_id = last.last_id,
               last_message_created_at = last.last_ts,
               updated_at = now()
          FROM last
         WHERE pl.partition_id = ANY (pids) AND pl.partition_id = last.pid
           AND (pl.last_message_created_at IS NULL
                OR (pl.last_message_created_at, pl.last_message_id) < (last.last_ts, last.last_id))
    ), upt AS (
        UPDATE queen.partitions pt SET last_activity = now()
          FROM last
         WHERE pt.id = ANY (pids) AND pt.id = last.pid
           AND pt.last_activity < now() - interval '1 second'
    )
    SELECT count(*) INTO v_missing FROM last;
END $$;
