-- Cheaper push for the broker's push lanes (issue 2: push b100 at >= 0.5x the plain
-- INSERT ceiling). queen.push_items (002) stays as it is for queen.transaction.
--
-- What it saves against queen.push_batch / push_items, per fused batch:
--  * the answer is compact: the distinct (queue, partition) pairs with their ids, and
--    only the items that were NOT inserted (duplicates) with the existing message id.
--    The broker rebuilds each item's answer from what it sent (ids, transaction and
--    trace ids are its own), so no jsonb object is built per item here;
--  * the duplicate lookup runs only when the INSERT skipped something;
--  * the partition_lookup rows are locked and their newest stamps read in one
--    statement: a row locked FOR NO KEY UPDATE is returned in its newest committed
--    version (READ COMMITTED re-reads a row that changed while we waited), so the
--    stamp is still read AFTER the lock;
--  * no DISTINCT ON sort: the INSERT runs in item order and ON CONFLICT DO NOTHING
--    keeps the first occurrence of a transaction id in a partition, as before;
--  * partitions.last_activity is refreshed at most once a second per partition
--    (it is shown by the catalogue, never used for ordering), not on every batch.
-- Append-order invariant (semantics.md §3) unchanged: partition_lookup rows locked in
-- partition-id order, created_at = greatest(clock_timestamp(), newest + 1 us) per
-- partition, computed under the lock, so created_at is strictly increasing per partition.

-- ---------------------------------------------------------------------------
-- queen.push_fast(p)
--   in : {tenant, items:[{queue, partition, id, txid, traceId|null, payload, encrypted,
--                         sub|null}]}
--   out: {pairs:[[queue, partition, partitionId, queueId], ...],
--         dups:[[index, existingMessageId|null], ...]}   (index 0-based into items)
--   An item not listed in dups was inserted (status queued, message_id = its id).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.push_fast(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant  uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_items   jsonb := p->'items';
    v_n       int;
    v_qn      text[];
    v_pn      text[];
    v_pid     uuid[];
    v_qid     uuid[];
    v_ts      timestamptz[];
    v_missing int;
    v_locked  int;
    v_ins     uuid[];
    v_dups    jsonb := '[]'::jsonb;
BEGIN
    IF v_items IS NULL OR jsonb_typeof(v_items) <> 'array' THEN
        RETURN jsonb_build_object('pairs', '[]'::jsonb, 'dups', '[]'::jsonb);
    END IF;
    v_n := jsonb_array_length(v_items);
    IF v_n = 0 THEN
        RETURN jsonb_build_object('pairs', '[]'::jsonb, 'dups', '[]'::jsonb);
    END IF;

    -- distinct (queue, partition) pairs
    SELECT array_agg(d.qn ORDER BY d.qn, d.pn), array_agg(d.pn ORDER BY d.qn, d.pn)
      INTO v_qn, v_pn
      FROM (SELECT DISTINCT e->>'queue' AS qn, coalesce(e->>'partition', 'Default') AS pn
              FROM jsonb_array_elements(v_items) AS e) d;

    FOR attempt IN 1..4 LOOP
        SELECT count(*) FILTER (WHERE pl.partition_id IS NULL)
          INTO v_missing
          FROM unnest(v_qn, v_pn) AS s(qn, pn)
          LEFT JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
          LEFT JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
          LEFT JOIN queen.partition_lookup pl ON pl.partition_id = pt.id;
        IF v_missing = 0 THEN
            -- serialise appends per partition (lock in partition-id order) and stamp
            -- from the newest committed version of each locked row
            WITH l AS (
                SELECT s.ord, pl.partition_id AS pid, pl.queue_id AS qid,
                       pl.last_message_created_at AS last_ts
                  FROM unnest(v_qn, v_pn) WITH ORDINALITY AS s(qn, pn, ord)
                  JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
                  JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
                  JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
                 ORDER BY pl.partition_id
                 FOR NO KEY UPDATE OF pl)
            SELECT count(*), array_agg(l.pid ORDER BY l.ord), array_agg(l.qid ORDER BY l.ord),
                   array_agg(greatest(clock_timestamp(),
                                      coalesce(l.last_ts + interval '1 microsecond', '-infinity'))
                             ORDER BY l.ord)
              INTO v_locked, v_pid, v_qid, v_ts
              FROM l;
            EXIT WHEN v_locked = cardinality(v_qn);
        END IF;
        IF attempt = 4 THEN
            RAISE EXCEPTION 'push: could not create queue/partition (concurrent delete?)';
        END IF;

        INSERT INTO queen.queues (tenant_id, name, namespace, task)
        SELECT v_tenant, s.qn,
               CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 1), '') END,
               CASE WHEN strpos(s.qn, '.') > 0 THEN nullif(split_part(s.qn, '.', 2), '') END
        FROM (SELECT DISTINCT qn FROM unnest(v_qn) AS u(qn)) s
        WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = s.qn)
        ORDER BY s.qn
        ON CONFLICT (tenant_id, name) DO NOTHING;

        INSERT INTO queen.partitions (queue_id, name)
        SELECT q.id, s.pn
        FROM unnest(v_qn, v_pn) AS s(qn, pn)
        JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
        WHERE NOT EXISTS (SELECT 1 FROM queen.partitions x WHERE x.queue_id = q.id AND x.name = s.pn)
        ORDER BY q.id, s.pn
        ON CONFLICT (queue_id, name) DO NOTHING;

        INSERT INTO queen.partition_lookup (partition_id, queue_id)
        SELECT pt.id, pt.queue_id
        FROM unnest(v_qn, v_pn) AS s(qn, pn)
        JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
        JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
        WHERE NOT EXISTS (SELECT 1 FROM queen.partition_lookup x WHERE x.partition_id = pt.id)
        ORDER BY pt.id
        ON CONFLICT (partition_id) DO NOTHING;
    END LOOP;

    -- insert in item order (first occurrence of a txid in a partition wins), then move
    -- each touched partition's newest message forward, in one statement
    WITH st AS (
        SELECT * FROM unnest(v_qn, v_pn, v_pid, v_ts) AS s(qn, pn, pid, ts)
    ), ins AS (
        INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                    created_at, is_encrypted, producer_sub)
        SELECT (e.v->>'id')::uuid, e.v->>'txid', (e.v->>'traceId')::uuid, st.pid,
               coalesce(e.v->'payload', 'null'::jsonb), st.ts,
               coalesce((e.v->>'encrypted')::boolean, false), e.v->>'sub'
          FROM jsonb_array_elements(v_items) WITH ORDINALITY AS e(v, ord)
          JOIN st ON st.qn = e.v->>'queue' AND st.pn = coalesce(e.v->>'partition', 'Default')
         ORDER BY e.ord
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
          FROM last
         WHERE pt.id = last.pid AND pt.last_activity < now() - interval '1 second'
        RETURNING 1
    )
    SELECT (SELECT array_agg(ins.id) FROM ins),
           (SELECT count(*) FROM upl) + (SELECT count(*) FROM upt)
      INTO v_ins, v_missing;

    -- duplicates only when the INSERT skipped something (fresh snapshot: a concurrent
    -- winner's row is visible now)
    IF coalesce(cardinality(v_ins), 0) < v_n THEN
        SELECT coalesce(jsonb_agg(jsonb_build_array(u.ord - 1,
                   (SELECT m.id FROM queen.messages m
                     WHERE m.partition_id = st.pid AND m.transaction_id = u.v->>'txid'))
                   ORDER BY u.ord), '[]'::jsonb)
          INTO v_dups
          FROM jsonb_array_elements(v_items) WITH ORDINALITY AS u(v, ord)
          JOIN unnest(v_qn, v_pn, v_pid) AS st(qn, pn, pid)
            ON st.qn = u.v->>'queue' AND st.pn = coalesce(u.v->>'partition', 'Default')
          LEFT JOIN unnest(v_ins) AS i(id) ON i.id = (u.v->>'id')::uuid
         WHERE i.id IS NULL;
    END IF;

    RETURN jsonb_build_object(
        'pairs', (SELECT jsonb_agg(jsonb_build_array(s.qn, s.pn, s.pid, s.qid))
                    FROM unnest(v_qn, v_pn, v_pid, v_qid) AS s(qn, pn, pid, qid)),
        'dups', v_dups);
END $$;
