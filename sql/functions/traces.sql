-- Message traces: record, read by message, by name, names.

-- Message traces (http-api.md §10): record, read by message, by name, names.

-- queen.trace_add(p)  in {tenant, transactionId, partitionId, consumerGroup, traceNames[],
--                         eventType, data, workerId}  out {found, traceId}
CREATE OR REPLACE FUNCTION queen.trace_add(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_mid uuid;
    v_pid uuid := queen.try_uuid(p->>'partitionId');
    v_id  uuid;
BEGIN
    SELECT m.id INTO v_mid FROM queen.messages m
      JOIN queen.partitions pt ON pt.id = m.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE m.partition_id = v_pid AND m.transaction_id = p->>'transactionId'
       AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    IF v_mid IS NULL THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    INSERT INTO queen.message_traces (message_id, partition_id, transaction_id, consumer_group,
                                      event_type, data, worker_id)
    VALUES (v_mid, v_pid, p->>'transactionId', p->>'consumerGroup',
            coalesce(p->>'eventType', 'info'), p->'data', p->>'workerId')
    RETURNING id INTO v_id;
    INSERT INTO queen.message_trace_names (trace_id, trace_name)
    SELECT DISTINCT v_id, n FROM jsonb_array_elements_text(coalesce(p->'traceNames', '[]')) n
     WHERE n <> '';
    RETURN jsonb_build_object('found', true, 'traceId', v_id);
END $$;

-- One trace row as JSON (snake_case keys).
CREATE OR REPLACE FUNCTION queen.trace_json(t queen.message_traces) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', t.id, 'event_type', t.event_type, 'data', t.data,
        'consumer_group', t.consumer_group, 'worker_id', t.worker_id,
        'created_at', queen.iso(t.created_at),
        'trace_names', coalesce((SELECT jsonb_agg(n.trace_name ORDER BY n.trace_name)
                                   FROM queen.message_trace_names n WHERE n.trace_id = t.id),
                                '[]'::jsonb))
$$;

-- queen.trace_by_message(p)  in {tenant, partitionId, transactionId}
CREATE OR REPLACE FUNCTION queen.trace_by_message(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('traces', coalesce(jsonb_agg(queen.trace_json(t)
                                          ORDER BY t.created_at, t.id), '[]'::jsonb))
      FROM queen.message_traces t
      JOIN queen.partitions pt ON pt.id = t.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE t.transaction_id = p->>'transactionId'
       AND t.partition_id = queen.try_uuid(p->>'partitionId')
       AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
$$;

-- queen.trace_by_name(p)  in {tenant, name, limit, offset}
CREATE OR REPLACE FUNCTION queen.trace_by_name(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
    WITH f AS (
        SELECT t, q.name AS qname, pt.name AS pname
          FROM queen.message_trace_names n
          JOIN queen.message_traces t ON t.id = n.trace_id
          JOIN queen.partitions pt ON pt.id = t.partition_id
          JOIN queen.queues q ON q.id = pt.queue_id
         WHERE n.trace_name = p->>'name'
           AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
    ), page AS (
        SELECT * FROM f ORDER BY (f.t).created_at DESC, (f.t).id DESC
         LIMIT (p->>'limit')::int OFFSET (p->>'offset')::int
    )
    SELECT jsonb_build_object(
        'traces', coalesce((SELECT jsonb_agg(queen.trace_json(x.t) || jsonb_build_object(
                'transaction_id', (x.t).transaction_id, 'partition_id', (x.t).partition_id,
                'queue_name', x.qname, 'partition_name', x.pname,
                'message_payload', (SELECT m.payload FROM queen.messages m
                                     WHERE m.id = (x.t).message_id))
              ORDER BY (x.t).created_at DESC, (x.t).id DESC) FROM page x), '[]'::jsonb),
        'total', (SELECT count(*) FROM f),
        'pagination', jsonb_build_object('limit', (p->>'limit')::int,
                                         'offset', (p->>'offset')::int))
$$;

-- queen.trace_names(p)  in {tenant, limit, offset}
CREATE OR REPLACE FUNCTION queen.trace_names(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
    WITH f AS (
        SELECT n.trace_name, count(*) AS traces, count(DISTINCT t.message_id) AS msgs,
               max(t.created_at) AS last_seen
          FROM queen.message_trace_names n
          JOIN queen.message_traces t ON t.id = n.trace_id
          JOIN queen.partitions pt ON pt.id = t.partition_id
          JOIN queen.queues q ON q.id = pt.queue_id
         WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
         GROUP BY n.trace_name
    ), page AS (
        SELECT * FROM f ORDER BY f.last_seen DESC, f.trace_name
         LIMIT (p->>'limit')::int OFFSET (p->>'offset')::int
    )
    SELECT jsonb_build_object(
        'trace_names', coalesce((SELECT jsonb_agg(jsonb_build_object(
                'trace_name', x.trace_name, 'trace_count', x.traces,
                'message_count', x.msgs, 'last_seen', queen.iso(x.last_seen))
              ORDER BY x.last_seen DESC, x.trace_name) FROM page x), '[]'::jsonb),
        'total', (SELECT count(*) FROM f),
        'pagination', jsonb_build_object('limit', (p->>'limit')::int,
                                         'offset', (p->>'offset')::int))
$$;
