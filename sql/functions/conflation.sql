-- Conflated ("last value") pop.

-- Conflated ("last value") pop, semantics.md §17 (issue 3).
--
-- A consumer group's conflation policy lives in consumer_groups_metadata.conflation
-- (jsonb, present since schema/001): NULL = normal delivery, 'true' = conflating. The queue-depth
-- readers (functions/resources.sql) count any non-null value as conflating, so this file never writes
-- 'false'. The policy of a (queue, group) is bool_or over the group's rows of that queue:
-- the first registration decides it and every later row copies it, so "first
-- registration wins" holds for the whole-queue row and the partition-form rows alike.
--
-- queen.pop is separate: the broker calls this function
-- only for pops that ask for conflation or whose group it knows (or suspects) conflates,
-- and falls back to queen.pop when this function answers {policy:false}.

-- True when a stored policy value means "conflating".
CREATE OR REPLACE FUNCTION queen.conflation_on(c jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT c IS NOT NULL AND c <> 'null'::jsonb AND c <> 'false'::jsonb
$$;

-- ---------------------------------------------------------------------------
-- queen.pop_conflated(p)
--   in : queen.pop's argument plus conflation (bool: the request asked for it).
--   out: {policy:false, registered:<bool>}  -- no queue in scope conflates for this
--                                              group: nothing claimed, use queen.pop
--        or queen.pop's answer plus policy:true. For each claimed partition of a
--        conflating queue exactly one message is delivered: the newest visible one after
--        the cursor (batch_size 1, so the ack moves the cursor onto it and the older
--        pending messages are never delivered). Partitions of non-conflating queues of a
--        discovery scope are read as queen.pop reads them.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.pop_conflated(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant   uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_queue    text := p->>'queue';
    v_part     text := p->>'partition';
    v_ns       text := p->>'namespace';
    v_task     text := p->>'task';
    v_group    text := coalesce(nullif(p->>'group', ''), '__QUEUE_MODE__');
    v_req      boolean := coalesce((p->>'conflation')::boolean, false);
    v_batch    int  := greatest(coalesce((p->>'batch')::numeric::int, 1), 1);
    v_maxparts int  := least(greatest(coalesce((p->>'partitions')::numeric::int, 1), 1), 64);
    v_lease_s  int  := (p->>'leaseSeconds')::numeric::int;
    v_auto     boolean := coalesce((p->>'autoAck')::boolean, false);
    v_mode     text := lower(coalesce(p->>'subMode', 'all'));
    v_from_txt text := p->>'subFrom';
    v_lease    uuid := coalesce(queen.try_uuid(p->>'leaseId'), gen_random_uuid());
    v_now      timestamptz := now();
    v_from     timestamptz;
    v_qids     uuid[];
    v_cq       uuid[];
    v_all_reg  boolean;
    v_remaining int;
    v_claimed  int := 0;
    v_msgs     jsonb := '[]'::jsonb;
    v_has_first boolean := false;
    v_first_q  text;
    v_first_p  text;
    v_first_pid uuid;
    v_first_exp timestamptz;
    c          record;
    v_l        record;
    v_k        record;
    v_conflate boolean;
    v_cur_ts   timestamptz;
    v_cur_id   uuid;
    v_exp      timestamptz;
    v_n        int;
    v_last_id  uuid;
    v_last_ts  timestamptz;
    v_batch_json jsonb;
    v_empty    jsonb := jsonb_build_object('messages', '[]'::jsonb, 'partitionsClaimed', 0,
                   'queue', NULL, 'partition', NULL, 'partitionId', NULL,
                   'leaseExpiresAt', NULL, 'policy', true);
BEGIN
    -- queue mode has no registration, so no stored policy: never conflating
    IF v_group = '__QUEUE_MODE__' THEN
        RETURN jsonb_build_object('policy', false, 'registered', true);
    END IF;
    IF v_part IS NOT NULL THEN
        v_maxparts := 1;
    END IF;

    IF v_queue IS NOT NULL THEN
        SELECT array_agg(q.id) INTO v_qids
          FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = v_queue;
    ELSE
        SELECT array_agg(q.id) INTO v_qids
          FROM queen.queues q
         WHERE q.tenant_id = v_tenant
           AND (v_ns IS NULL OR q.namespace = v_ns)
           AND (v_task IS NULL OR q.task = v_task);
    END IF;
    IF v_qids IS NULL THEN
        -- nothing to register against: the request's own wish is the effective policy
        IF v_req THEN
            RETURN v_empty;
        END IF;
        RETURN jsonb_build_object('policy', false, 'registered', false);
    END IF;

    -- stored policy per queue; unregistered queues take the request's wish
    SELECT coalesce(array_agg(s.qid) FILTER (WHERE s.conf OR (NOT s.reg AND v_req)), '{}'),
           bool_and(s.reg)
      INTO v_cq, v_all_reg
      FROM (SELECT u.qid,
                   coalesce(bool_or(queen.conflation_on(m.conflation)), false) AS conf,
                   count(m.id) > 0 AS reg
              FROM unnest(v_qids) AS u(qid)
              LEFT JOIN queen.consumer_groups_metadata m
                     ON m.queue_id = u.qid AND m.consumer_group = v_group
             GROUP BY u.qid) s;
    IF cardinality(v_cq) = 0 THEN
        RETURN jsonb_build_object('policy', false, 'registered', v_all_reg);
    END IF;

    -- subscription registration (first registration wins), carrying the policy
    IF v_from_txt IS NOT NULL AND lower(v_from_txt) = 'now' THEN
        v_mode := 'new';
    END IF;
    IF v_mode IN ('new', 'new-only') THEN
        v_mode := 'new';
        v_from := v_now;
    ELSIF v_mode = 'timestamp' AND v_from_txt IS NOT NULL THEN
        v_from := v_from_txt::timestamptz;
    ELSE
        v_mode := 'all';
        v_from := NULL;
    END IF;
    INSERT INTO queen.consumer_groups_metadata
           (queue_id, consumer_group, queue_name, partition_name, namespace, task,
            subscription_mode, subscription_timestamp, conflation)
    SELECT q.id, v_group, q.name, coalesce(v_part, ''), '', '', v_mode, v_from,
           CASE WHEN q.id = ANY (v_cq) THEN 'true'::jsonb END
      FROM queen.queues q
     WHERE q.id = ANY (v_qids)
       AND NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                        WHERE m.queue_id = q.id AND m.consumer_group = v_group
                          AND m.partition_name = coalesce(v_part, '')
                          AND m.namespace = '' AND m.task = '')
     ORDER BY q.id
    ON CONFLICT (queue_id, consumer_group, partition_name, namespace, task) DO NOTHING;

    -- a concurrent first registration may have won the other way: re-read what is stored
    SELECT coalesce(array_agg(DISTINCT m.queue_id), '{}') INTO v_cq
      FROM queen.consumer_groups_metadata m
     WHERE m.queue_id = ANY (v_qids) AND m.consumer_group = v_group
       AND queen.conflation_on(m.conflation);
    IF cardinality(v_cq) = 0 THEN
        RETURN jsonb_build_object('policy', false, 'registered', true);
    END IF;

    v_remaining := v_batch;

    FOR c IN SELECT * FROM queen.pop_candidates(v_qids, v_part, v_group, v_now,
                                                v_maxparts * 4 + 8, queen.pop_sweep_depth(p)) LOOP
        EXIT WHEN v_claimed >= v_maxparts OR v_remaining <= 0;
        v_conflate := c.qid = ANY (v_cq);
        -- the try-lock, then the cursor re-read under it (queen.pop_lock)
        v_l := queen.pop_lock(c.partition_id, v_group, v_now, c.cur_ts);
        CONTINUE WHEN NOT v_l.ok;
        v_cur_ts := v_l.cur_ts;
        v_cur_id := v_l.cur_id;

        -- conflating: only the newest visible message after the cursor (one backward
        -- index step); otherwise the oldest v_remaining, as queen.pop reads them
        SELECT count(*)::int,
               jsonb_agg(jsonb_build_object(
                   'id', m.id,
                   'transactionId', m.transaction_id,
                   'traceId', m.trace_id,
                   'data', m.payload,
                   'producerSub', m.producer_sub,
                   'createdAt', queen.iso(m.created_at),
                   'partitionId', m.partition_id,
                   'partition', c.pname,
                   'queue', c.qname,
                   'isEncrypted', m.is_encrypted) ORDER BY m.created_at, m.id),
               (array_agg(m.id ORDER BY m.created_at DESC, m.id DESC))[1],
               max(m.created_at)
          INTO v_n, v_batch_json, v_last_id, v_last_ts
          FROM ((SELECT * FROM queen.messages mm
                  WHERE v_conflate AND mm.partition_id = c.partition_id
                    AND (mm.created_at, mm.id) > (v_cur_ts, v_cur_id)
                    AND mm.created_at >= queen.pop_oldest_deliverable(c.qid, v_now)
                    AND (c.delayed_processing <= 0
                         OR mm.created_at <= v_now - c.delayed_processing * interval '1 second')
                  ORDER BY mm.created_at DESC, mm.id DESC
                  LIMIT 1)
                UNION ALL
                (SELECT * FROM queen.messages mm
                  WHERE NOT v_conflate AND mm.partition_id = c.partition_id
                    AND (mm.created_at, mm.id) > (v_cur_ts, v_cur_id)
                    AND mm.created_at >= queen.pop_oldest_deliverable(c.qid, v_now)
                    AND (c.delayed_processing <= 0
                         OR mm.created_at <= v_now - c.delayed_processing * interval '1 second')
                  ORDER BY mm.created_at, mm.id
                  LIMIT v_remaining)) m;

        CONTINUE WHEN v_n = 0;

        v_k := queen.pop_claim(c.partition_id, v_group, v_auto, v_lease, v_now, v_lease_s,
                               c.lease_time, v_n, v_last_ts, v_last_id, c.last_ts, c.last_id);
        -- lost the race (leased meanwhile): skip this partition
        CONTINUE WHEN NOT v_k.claimed;
        v_exp := v_k.expires;

        v_msgs := v_msgs || v_batch_json;
        v_claimed := v_claimed + 1;
        v_remaining := v_remaining - v_n;
        IF NOT v_has_first THEN
            v_has_first := true;
            v_first_q := c.qname;
            v_first_p := c.pname;
            v_first_pid := c.partition_id;
            v_first_exp := CASE WHEN v_auto THEN NULL ELSE v_exp END;
        END IF;
    END LOOP;

    IF v_claimed = 0 THEN
        RETURN v_empty;
    END IF;
    RETURN jsonb_build_object(
        'messages', v_msgs,
        'partitionsClaimed', v_claimed,
        'queue', v_first_q,
        'partition', v_first_p,
        'partitionId', v_first_pid,
        'leaseExpiresAt', queen.iso(v_first_exp),
        'policy', true);
END $$;
