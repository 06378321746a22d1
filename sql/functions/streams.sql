-- Streams (http-api.md §19): query registration, the atomic cycle, state reads
-- and the dashboard's overview. Tables in schema/011_streams.sql.
--
-- Every function takes the caller's tenant; a query of another tenant answers as
-- one that does not exist. Failures a client should read are RAISEd (SQLSTATE
-- P0001, the text below), so the one statement rolls back whole and the broker
-- passes the text on (src/store/db_group.rs, classify); nothing else of
-- PostgreSQL's reaches a client.

-- ---------------------------------------------------------------------------
-- queen.streams_register(p)
--   in : {tenant, name, source_queue, sink_queue|null, config_hash, reset:bool}
--   out: {query_id, name, config_hash, fresh, reset, conflict, stored_hash}
--   conflict=true (nothing changed): the name is registered with another
--   config_hash and reset is false. reset=true with another hash stores the new
--   hash (and queues) and deletes all the query's state; with the same hash it
--   changes nothing (the SDK documents reset as "wipe state if config_hash
--   mismatches").
--   Raises 'streams quota reached: ...' when a new name would pass the tenant's
--   queen_streams.quota.max_queries.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.streams_register(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_name   text := p->>'name';
    v_hash   text := p->>'config_hash';
    v_reset  boolean := coalesce((p->>'reset')::boolean, false);
    v_max    int;
    q        queen_streams.queries;
    v_fresh  boolean := false;
BEGIN
    SELECT * INTO q FROM queen_streams.queries
     WHERE tenant_id = v_tenant AND name = v_name FOR UPDATE;
    IF NOT FOUND THEN
        SELECT max_queries INTO v_max FROM queen_streams.quota WHERE tenant_id = v_tenant;
        IF v_max IS NOT NULL
           AND (SELECT count(*) FROM queen_streams.queries WHERE tenant_id = v_tenant) >= v_max THEN
            RAISE EXCEPTION 'streams quota reached: this tenant may register % queries', v_max;
        END IF;
        INSERT INTO queen_streams.queries (tenant_id, name, source_queue, sink_queue, config_hash)
        VALUES (v_tenant, v_name, p->>'source_queue', p->>'sink_queue', v_hash)
        ON CONFLICT (tenant_id, name) DO NOTHING
        RETURNING * INTO q;
        v_fresh := FOUND;
        IF NOT v_fresh THEN
            -- registered concurrently: read the winner under its lock
            SELECT * INTO q FROM queen_streams.queries
             WHERE tenant_id = v_tenant AND name = v_name FOR UPDATE;
        END IF;
    END IF;

    IF q.config_hash IS DISTINCT FROM v_hash THEN
        IF NOT v_reset THEN
            RETURN jsonb_build_object('query_id', q.id, 'name', q.name, 'config_hash', v_hash,
                                      'fresh', false, 'reset', false, 'conflict', true,
                                      'stored_hash', q.config_hash);
        END IF;
        DELETE FROM queen_streams.state WHERE query_id = q.id;
        DELETE FROM queen_streams.partitions WHERE query_id = q.id;
        UPDATE queen_streams.queries
           SET config_hash = v_hash, source_queue = p->>'source_queue',
               sink_queue = p->>'sink_queue', updated_at = now()
         WHERE id = q.id;
        RETURN jsonb_build_object('query_id', q.id, 'name', q.name, 'config_hash', v_hash,
                                  'fresh', false, 'reset', true, 'conflict', false);
    END IF;
    RETURN jsonb_build_object('query_id', q.id, 'name', q.name, 'config_hash', q.config_hash,
                              'fresh', v_fresh, 'reset', false, 'conflict', false);
END $$;

-- The advisory lock of one (query, partition): the two-key form, so it never
-- meets the one-key locks of acks and jobs (queen.lock_key).
CREATE OR REPLACE FUNCTION queen.streams_lock(p_query uuid, p_partition text) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext(p_query::text), hashtext(p_partition))
$$;

-- ---------------------------------------------------------------------------
-- queen.streams_ack(tenant, source, partition, group, ack, release) -- the cycle's source ack
--   ack: {transactionId, leaseId, status: completed|success|failed|dlq, count}
--   out: {success:true, count, lease_released, dlq}
--   The message transactionId of the partition closes the acknowledged run:
--   completed/success move the group's cursor to it (count messages consumed);
--   dlq dead-letters the messages after the cursor up to it, then moves the
--   cursor; failed gives the batch back for redelivery (retry count + 1; past
--   the queue's retryLimit it is dead-lettered as dlq is). release=false keeps
--   the lease (completed/success/dlq). Raises, so the whole cycle rolls back:
--   'Invalid or expired lease' (no live lease, or another holder's),
--   'Message not found', 'Message already acknowledged', 'Invalid ack status: <s>',
--   'The ack's partition is not of the query's source queue'.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.streams_ack(p_tenant uuid, p_source text, p_pid uuid,
    p_group text, p_ack jsonb, p_release boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_status text := lower(coalesce(p_ack->>'status', 'completed'));
    v_lease  uuid := queen.try_uuid(p_ack->>'leaseId');
    v_count  int := greatest(coalesce((p_ack->>'count')::numeric::int, 1), 1);
    v_now    timestamptz := now();
    v_mid    uuid;
    v_mts    timestamptz;
    v_retry  int;
    v_queue  text;
    pc       queen.partition_consumers;
    v_dlq    boolean := false;
BEGIN
    IF v_status NOT IN ('completed', 'success', 'failed', 'dlq') THEN
        RAISE EXCEPTION 'Invalid ack status: %', v_status;
    END IF;
    PERFORM pg_advisory_xact_lock(queen.lock_key(p_pid, p_group));
    SELECT m.id, m.created_at, q.retry_limit, q.name INTO v_mid, v_mts, v_retry, v_queue
      FROM queen.messages m
      JOIN queen.partitions pt ON pt.id = m.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id AND q.tenant_id = p_tenant
     WHERE m.partition_id = p_pid AND m.transaction_id = p_ack->>'transactionId';
    IF v_mid IS NULL THEN
        RAISE EXCEPTION 'Message not found';
    END IF;
    IF v_queue IS DISTINCT FROM p_source THEN
        RAISE EXCEPTION 'The ack''s partition is not of the query''s source queue';
    END IF;
    SELECT * INTO pc FROM queen.partition_consumers
     WHERE partition_id = p_pid AND consumer_group = p_group;
    IF NOT FOUND OR v_lease IS NULL OR pc.worker_id IS DISTINCT FROM v_lease
       OR pc.lease_expires_at <= v_now THEN
        RAISE EXCEPTION 'Invalid or expired lease';
    END IF;
    IF pc.last_consumed_created_at IS NOT NULL
       AND (v_mts, v_mid) <= (pc.last_consumed_created_at, pc.last_consumed_id) THEN
        RAISE EXCEPTION 'Message already acknowledged';
    END IF;

    IF v_status = 'failed' AND pc.batch_retry_count < coalesce(v_retry, 3) THEN
        UPDATE queen.partition_consumers SET
            worker_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
            batch_retry_count = batch_retry_count + 1, behind = true
         WHERE partition_id = p_pid AND consumer_group = p_group;
        RETURN jsonb_build_object('success', true, 'count', 0, 'lease_released', true, 'dlq', false);
    END IF;
    IF v_status IN ('failed', 'dlq') THEN
        v_dlq := true;
        p_release := p_release OR v_status = 'failed';
        INSERT INTO queen.dead_letter_queue AS d
               (message_id, partition_id, consumer_group, error_message, retry_count,
                original_created_at, failed_at)
        SELECT m.id, m.partition_id, p_group,
               CASE WHEN v_status = 'dlq' THEN 'Dead-lettered by a stream cycle'
                    ELSE 'Retries exhausted' END,
               pc.batch_retry_count, m.created_at, v_now
          FROM queen.messages m
         WHERE m.partition_id = p_pid
           AND (m.created_at, m.id) <= (v_mts, v_mid)
           AND (pc.last_consumed_created_at IS NULL
                OR (m.created_at, m.id) > (pc.last_consumed_created_at, pc.last_consumed_id))
        ON CONFLICT (message_id, consumer_group) DO UPDATE SET
            error_message = EXCLUDED.error_message, failed_at = EXCLUDED.failed_at;
    END IF;
    UPDATE queen.partition_consumers SET
        last_consumed_id = v_mid,
        last_consumed_created_at = v_mts,
        last_consumed_at = v_now,
        total_messages_consumed = total_messages_consumed + CASE WHEN v_dlq THEN 0 ELSE v_count END,
        total_batches_consumed = total_batches_consumed + CASE WHEN p_release THEN 1 ELSE 0 END,
        acked_count = acked_count + v_count,
        worker_id = CASE WHEN p_release THEN NULL ELSE worker_id END,
        lease_expires_at = CASE WHEN p_release THEN NULL ELSE lease_expires_at END,
        lease_acquired_at = CASE WHEN p_release THEN NULL ELSE lease_acquired_at END,
        batch_retry_count = CASE WHEN p_release THEN 0 ELSE batch_retry_count END,
        behind = (worker_id IS NOT NULL AND NOT p_release)  -- still leased (schema 012)
                 OR EXISTS (SELECT 1 FROM queen.partition_lookup pl
                          WHERE pl.partition_id = p_pid
                            AND (pl.last_message_created_at, pl.last_message_id) > (v_mts, v_mid))
     WHERE partition_id = p_pid AND consumer_group = p_group;
    RETURN jsonb_build_object('success', true, 'count', v_count,
                              'lease_released', p_release, 'dlq', v_dlq);
END $$;

-- ---------------------------------------------------------------------------
-- queen.streams_cycle(p) -- one cycle, one statement, one transaction
--   in : {tenant, query_id, partition_id, group,
--         state_ops:[{type:"upsert", key, value} | {type:"delete", key}],
--         push_items:[items as queen.push_items takes them (ids minted, sealed)],
--         ack:{transactionId, leaseId, status, count}|null, release_lease:bool}
--   out: {query_id, partition_id, queueName, state_ops_applied,
--         push_results:[{index, transaction_id, message_id, status, queue, partition_id}],
--         ack_result:{success, count, lease_released, dlq}|null}
--   Order: the (query, partition) advisory lock, state ops (the last op of a key
--   wins; upserts in key order), sink pushes (queen.push_items: partition locks in
--   id order), the ack (its (partition, group) lock). Any RAISE rolls all back:
--   'Unknown query_id', 'partition_id must be the source partition's id for an ack',
--   and those of queen.streams_ack and queen.push_items.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.streams_cycle(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qid    uuid := queen.try_uuid(p->>'query_id');
    v_part   text := p->>'partition_id';
    v_ops    jsonb := coalesce(p->'state_ops', '[]'::jsonb);
    v_items  jsonb := coalesce(p->'push_items', '[]'::jsonb);
    v_ack    jsonb := nullif(p->'ack', 'null'::jsonb);
    v_source text;
    v_pres   jsonb;
    v_ares   jsonb;
    v_pid    uuid;
BEGIN
    SELECT source_queue INTO v_source FROM queen_streams.queries
     WHERE id = v_qid AND tenant_id = v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'Unknown query_id';
    END IF;
    PERFORM queen.streams_lock(v_qid, v_part);

    WITH o AS (
        SELECT DISTINCT ON (e.v->>'key') e.v->>'key' AS k, e.v->>'type' AS t, e.v->'value' AS val
          FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS e(v, ord)
         ORDER BY e.v->>'key', e.ord DESC
    ), del AS (
        DELETE FROM queen_streams.state s USING o
         WHERE o.t = 'delete' AND s.query_id = v_qid AND s.partition_id = v_part AND s.key = o.k
    )
    INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value, updated_at)
    SELECT v_qid, v_part, o.k, o.val, now() FROM o WHERE o.t = 'upsert' ORDER BY o.k
    ON CONFLICT (query_id, partition_id, key)
    DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;

    v_pres := queen.push_items(v_tenant, v_items);

    IF v_ack IS NOT NULL THEN
        v_pid := queen.try_uuid(v_part);
        IF v_pid IS NULL THEN
            RAISE EXCEPTION 'partition_id must be the source partition''s id for an ack';
        END IF;
        v_ares := queen.streams_ack(v_tenant, v_source, v_pid,
                                    coalesce(nullif(p->>'group', ''), '__QUEUE_MODE__'),
                                    v_ack, coalesce((p->>'release_lease')::boolean, true));
    END IF;

    INSERT INTO queen_streams.partitions AS x (query_id, partition_id, nr_cycles)
    VALUES (v_qid, v_part, 1)
    ON CONFLICT (query_id, partition_id)
    DO UPDATE SET nr_cycles = x.nr_cycles + 1, last_cycle_at = now();

    RETURN jsonb_build_object(
        'query_id', v_qid, 'partition_id', v_part, 'queueName', v_source,
        'state_ops_applied', jsonb_array_length(v_ops),
        'push_results', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'index', r.ord - 1, 'transaction_id', r.v->>'transaction_id',
                       'message_id', r.v->>'message_id', 'status', r.v->>'status',
                       'queue', v_items->(r.ord::int - 1)->>'queue',
                       'partition_id', r.v->>'partition_id') ORDER BY r.ord)
              FROM jsonb_array_elements(v_pres) WITH ORDINALITY AS r(v, ord)), '[]'::jsonb),
        'ack_result', v_ares);
END $$;

-- ---------------------------------------------------------------------------
-- queen.streams_state_get(p)
--   in : {tenant, query_id, partition_id, keys:[..] (empty = all), key_prefix|null,
--         ripe_ms|null}
--   out: {rows:[{key, value, updated_at}]} ordered by key
--   ripe_ms (inferred from the SDK's idle flush): only rows whose value carries a
--   numeric windowEnd at or before it (epoch ms), the windows ripe to close.
--   Raises 'Unknown query_id'.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.streams_state_get(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qid    uuid := queen.try_uuid(p->>'query_id');
    v_keys   text[];
    v_prefix text := nullif(p->>'key_prefix', '');
    v_ripe   numeric := (p->>'ripe_ms')::numeric;
    v_rows   jsonb;
BEGIN
    PERFORM 1 FROM queen_streams.queries WHERE id = v_qid AND tenant_id = v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'Unknown query_id';
    END IF;
    SELECT array_agg(k) INTO v_keys FROM jsonb_array_elements_text(coalesce(p->'keys', '[]')) k;
    SELECT coalesce(jsonb_agg(jsonb_build_object('key', s.key, 'value', s.value,
                                                 'updated_at', queen.iso(s.updated_at))
                              ORDER BY s.key), '[]'::jsonb)
      INTO v_rows
      FROM queen_streams.state s
     WHERE s.query_id = v_qid AND s.partition_id = p->>'partition_id'
       AND (v_keys IS NULL OR s.key = ANY (v_keys))
       -- a prefix as a key range (no LIKE escaping; the primary key serves it)
       AND (v_prefix IS NULL OR (s.key >= v_prefix AND left(s.key, length(v_prefix)) = v_prefix))
       AND (v_ripe IS NULL
            OR (jsonb_typeof(s.value->'windowEnd') = 'number'
                AND (s.value->>'windowEnd')::numeric <= v_ripe));
    RETURN jsonb_build_object('rows', v_rows);
END $$;

-- ---------------------------------------------------------------------------
-- queen.streams_overview(p)  in {tenant}
--   out: {queries:[{id, name, source_queue, sink_queue, config_hash, created_at,
--          updated_at, partitions, state_rows, cycles, last_cycle_at}]}
--   The dashboard's streams view: one row per query of the tenant, newest first.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.streams_overview(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('queries', coalesce(jsonb_agg(jsonb_build_object(
               'id', q.id, 'name', q.name, 'source_queue', q.source_queue,
               'sink_queue', q.sink_queue, 'config_hash', q.config_hash,
               'created_at', queen.iso(q.created_at), 'updated_at', queen.iso(q.updated_at),
               'partitions', coalesce(pa.n, 0), 'cycles', coalesce(pa.cycles, 0),
               'last_cycle_at', queen.iso(pa.last_at),
               'state_rows', (SELECT count(*) FROM queen_streams.state s WHERE s.query_id = q.id))
             ORDER BY q.created_at DESC), '[]'::jsonb))
      FROM queen_streams.queries q
      LEFT JOIN LATERAL (SELECT count(*) AS n, sum(x.nr_cycles) AS cycles,
                                max(x.last_cycle_at) AS last_at
                           FROM queen_streams.partitions x WHERE x.query_id = q.id) pa ON true
     WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
$$;
