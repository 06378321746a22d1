-- Push with typed array parameters (issue 2: push b100 at >= 0.5x the plain INSERT
-- ceiling). Same work, locks, answers and append order as queen.push_fast (007), but the
-- broker binds one array per column instead of one jsonb document, so PostgreSQL no
-- longer parses the whole document (ids, transaction ids, queue and partition names of
-- every item) and then pulls each field back out of it as text (`->>`, casts). Only the
-- payloads are parsed (each once, as jsonb, straight into the row), and the broker sends
-- the distinct (queue, partition) pairs once with an index per item, so no per-item
-- string join is needed to find an item's partition.
--
-- Append-order invariant (semantics.md §3) unchanged: partition_lookup rows locked in
-- partition-id order, created_at = greatest(clock_timestamp(), newest + 1 us) per
-- partition computed under the lock; rows inserted in item order, ON CONFLICT DO NOTHING
-- keeps the first occurrence of a transaction id in a partition.

-- ---------------------------------------------------------------------------
-- queen.push_typed(tenant, qn[], pn[], pair[], id[], txid[], trace[], payload[], enc[], sub[])
--   in : qn[k], pn[k]  the distinct (queue, partition) pairs (k = 1..pairs);
--        pair[i]       item i's pair (1-based index into qn/pn);
--        id, txid, trace (null ok), payload (jsonb), enc, sub (null ok): per item i.
--   out: pids[k], qids[k]   partition and queue id of pair k;
--        dup_ord[], dup_id[] the items NOT inserted (1-based item index) and the id of
--                            the message already holding their transaction id (null if
--                            it vanished meanwhile).
--   An item not listed in dup_ord was inserted (status queued, message id = its id).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.push_typed(
    p_tenant uuid, p_qn text[], p_pn text[], p_pair int[], p_id uuid[], p_txid text[],
    p_trace uuid[], p_payload jsonb[], p_enc boolean[], p_sub text[],
    OUT pids uuid[], OUT qids uuid[], OUT dup_ord int[], OUT dup_id uuid[])
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant  uuid := coalesce(p_tenant, '00000000-0000-0000-0000-000000000001');
    v_n       int := coalesce(cardinality(p_id), 0);
    v_ts      timestamptz[];
    v_missing int;
    v_locked  int;
    v_ins     int;
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;

    FOR attempt IN 1..4 LOOP
        -- lock only when every pair exists: no lookup row is held while partitions are
        -- being created (creation may wait on a concurrent creator)
        SELECT count(*) FILTER (WHERE pl.partition_id IS NULL)
          INTO v_missing
          FROM unnest(p_qn, p_pn) AS s(qn, pn)
          LEFT JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
          LEFT JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
          LEFT JOIN queen.partition_lookup pl ON pl.partition_id = pt.id;
        IF v_missing = 0 THEN
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
            EXIT WHEN v_locked = cardinality(p_qn);
        END IF;
        IF attempt = 4 THEN
            RAISE EXCEPTION 'push: could not create queue/partition (concurrent delete?)';
        END IF;

        INSERT INTO queen.queues (tenant_id, name, namespace, task)
        SELECT v_tenant, s.qn,
               CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 1), '') END,
               CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 2), '') END
        FROM (SELECT DISTINCT qn FROM unnest(p_qn) AS u(qn)) s
        WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = s.qn)
        ORDER BY s.qn
        ON CONFLICT (tenant_id, name) DO NOTHING;

        INSERT INTO queen.partitions (queue_id, name)
        SELECT q.id, s.pn
        FROM unnest(p_qn, p_pn) AS s(qn, pn)
        JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
        WHERE NOT EXISTS (SELECT 1 FROM queen.partitions x WHERE x.queue_id = q.id AND x.name = s.pn)
        ORDER BY q.id, s.pn
        ON CONFLICT (queue_id, name) DO NOTHING;

        INSERT INTO queen.partition_lookup (partition_id, queue_id)
        SELECT pt.id, pt.queue_id
        FROM unnest(p_qn, p_pn) AS s(qn, pn)
        JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
        JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
        WHERE NOT EXISTS (SELECT 1 FROM queen.partition_lookup x WHERE x.partition_id = pt.id)
        ORDER BY pt.id
        ON CONFLICT (partition_id) DO NOTHING;
    END LOOP;

    -- insert in item order, then move each touched partition's newest message forward
    WITH ins AS (
        INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                    created_at, is_encrypted, producer_sub)
        SELECT u.id, u.txid, u.trace, pids[u.k], coalesce(u.payload, 'null'::jsonb),
               v_ts[u.k], coalesce(u.enc, false), u.sub
          FROM unnest(p_pair, p_id, p_txid, p_trace, p_payload, p_enc, p_sub)
               WITH ORDINALITY AS u(k, id, txid, trace, payload, enc, sub, ord)
         ORDER BY u.ord
        ON CONFLICT DO NOTHING
        RETURNING id, partition_id, created_at
    ), last AS (
        SELECT ins.partition_id AS pid, max(ins.created_at) AS last_ts,
               (array_agg(ins.id ORDER BY ins.created_at DESC, ins.id DESC))[1] AS last_id,
               count(*) AS n
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
          FROM last
         WHERE pt.id = last.pid AND pt.last_activity < now() - interval '1 second'
        RETURNING 1
    )
    SELECT coalesce((SELECT sum(last.n) FROM last), 0),
           (SELECT count(*) FROM upl) + (SELECT count(*) FROM upt)
      INTO v_ins, v_missing;

    -- duplicates only when the INSERT skipped something (fresh snapshot: a concurrent
    -- winner's row is visible now)
    IF v_ins < v_n THEN
        SELECT array_agg(u.ord::int ORDER BY u.ord), array_agg(m.id ORDER BY u.ord)
          INTO dup_ord, dup_id
          FROM unnest(p_pair, p_id, p_txid) WITH ORDINALITY AS u(k, id, txid, ord)
          LEFT JOIN queen.messages m
            ON m.partition_id = pids[u.k] AND m.transaction_id = u.txid
         WHERE m.id IS DISTINCT FROM u.id;
    END IF;
END $$;
