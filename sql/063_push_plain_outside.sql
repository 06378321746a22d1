-- queen.push_plain (062) again, with its updates moved out of the subtransaction.
--
-- 062 ran the plain INSERT *and* the partition_lookup / partitions updates inside the
-- BEGIN ... EXCEPTION block. The lookup rows are locked FOR NO KEY UPDATE by the top
-- transaction before the block, so an UPDATE of them from the block's subtransaction is a
-- second transaction id on a row already locked: PostgreSQL records that pair as a
-- MultiXact on every pushed partition, and every later reader of those rows (pop's
-- partition choice, the next push's lock) resolves it through the MultiXact SLRU. Push over
-- 1,000 partitions fell to 0.78x and end-to-end p50 at 1,000 msg/s doubled
-- (bench/results/2026-11-30-7f7c6d2-vs-6f295b3.md). Only the INSERT needs the
-- subtransaction (it is what a unique violation undoes); the updates now run in the top
-- transaction, after it, and only when it succeeded.

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
    v_inserted boolean;
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
            v_inserted := true;
        EXCEPTION WHEN unique_violation THEN
            -- a duplicate id or transaction id: the subtransaction is undone, the locks
            -- taken above stay held, and push_typed answers the call (below)
            v_inserted := false;
        END;
        IF v_inserted THEN
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
        END IF;
    END IF;

    SELECT t.pids, t.qids, t.dup_ord, t.dup_id
      INTO pids, qids, dup_ord, dup_id
      FROM queen.push_typed(p_tenant, p_qn, p_pn, p_pair, p_id, p_txid, p_trace,
                            p_payload, p_enc, p_sub) AS t;
END $$;
