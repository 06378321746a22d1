-- Push without speculative insertion on the common path (issue 2: push b100 at >= 0.5x
-- the plain INSERT ceiling). queen.push_typed (060) inserts with ON CONFLICT DO NOTHING
-- and RETURNING so that it can answer duplicates and find each partition's newest
-- message. ON CONFLICT makes every row a speculative insertion (an extra arbiter probe of
-- the unique index and an extra WAL record to confirm the row), and RETURNING feeds a
-- per-partition sort: per row, that is most of what push costs PostgreSQL beyond the
-- plain INSERT it is measured against. Duplicates are rare (a client re-sending a
-- transaction id, a spool replay of a batch whose commit answer was lost), so this
-- function tries the plain INSERT first, in a subtransaction, and hands the whole call to
-- push_typed when a unique index refuses a row (or a pair does not exist yet). The
-- answer and every rule (locks, append order, dedup) are push_typed's.
--
-- The newest message of each pair is known before the insert when nothing is skipped:
-- all items of a pair get the pair's one timestamp, so the newest is the greatest id,
-- which the broker sends as p_last (uuid order is byte order on both sides).

-- ---------------------------------------------------------------------------
-- queen.push_plain(tenant, qn[], pn[], pair[], id[], txid[], trace[], payload[], enc[],
--                  sub[], last[])
--   in : as push_typed, plus last[k] = the greatest id among pair k's items.
--   out: as push_typed.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.push_plain(
    p_tenant uuid, p_qn text[], p_pn text[], p_pair int[], p_id uuid[], p_txid text[],
    p_trace uuid[], p_payload jsonb[], p_enc boolean[], p_sub text[], p_last uuid[],
    OUT pids uuid[], OUT qids uuid[], OUT dup_ord int[], OUT dup_id uuid[])
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant  uuid := coalesce(p_tenant, '00000000-0000-0000-0000-000000000001');
    v_ts      timestamptz[];
    v_pairs   int := coalesce(cardinality(p_qn), 0);
    v_locked  int := -1;
BEGIN
    IF coalesce(cardinality(p_id), 0) = 0 THEN
        RETURN;
    END IF;

    -- Lock only when every pair already exists (push_typed creates the missing ones;
    -- no lookup row may be held while a creation waits on a concurrent creator).
    IF NOT EXISTS (
        SELECT 1
          FROM unnest(p_qn, p_pn) AS s(qn, pn)
          LEFT JOIN queen.queues q ON q.tenant_id = v_tenant AND q.name = s.qn
          LEFT JOIN queen.partitions pt ON pt.queue_id = q.id AND pt.name = s.pn
          LEFT JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
         WHERE pl.partition_id IS NULL)
    THEN
        -- appends serialise per partition (locks in partition-id order); each pair's
        -- stamp comes from the newest committed version of its locked row
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
    END IF;

    IF v_locked = v_pairs THEN
        BEGIN
            INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload,
                                        created_at, is_encrypted, producer_sub)
            SELECT u.id, u.txid, u.trace, pids[u.k], coalesce(u.payload, 'null'::jsonb),
                   v_ts[u.k], coalesce(u.enc, false), u.sub
              FROM unnest(p_pair, p_id, p_txid, p_trace, p_payload, p_enc, p_sub)
                   AS u(k, id, txid, trace, payload, enc, sub);

            UPDATE queen.partition_lookup pl
               SET last_message_id = p_last[s.k],
                   last_message_created_at = v_ts[s.k],
                   updated_at = now()
              FROM generate_subscripts(p_qn, 1) AS s(k)
             WHERE pl.partition_id = pids[s.k]
               AND (pl.last_message_created_at IS NULL
                    OR (pl.last_message_created_at, pl.last_message_id) < (v_ts[s.k], p_last[s.k]));

            UPDATE queen.partitions pt SET last_activity = now()
              FROM unnest(pids) AS u(pid)
             WHERE pt.id = u.pid AND pt.last_activity < now() - interval '1 second';
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            -- a duplicate id or transaction id: the subtransaction is undone, the locks
            -- taken above stay held, and push_typed answers the call (below)
            NULL;
        END;
    END IF;

    SELECT t.pids, t.qids, t.dup_ord, t.dup_id
      INTO pids, qids, dup_ord, dup_id
      FROM queen.push_typed(p_tenant, p_qn, p_pn, p_pair, p_id, p_txid, p_trace,
                            p_payload, p_enc, p_sub) AS t;
END $$;
