-- Transaction endpoint: pushes and acks applied all-or-nothing.

-- ---------------------------------------------------------------------------
-- queen.transaction(p)
--   in : {tenant, requiredLeases:[leaseId...], kv?:[validated KV ops], kvMaxRead?,
--         operations:[{type:"push", items:[push_batch items]}
--                   | {type:"ack", transactionId, partitionId, status, group,
--                      leaseId|null, error|null}]}
--   out: {success:true, results:[
--           {index, type:"push", success:true, transactionId, messageId, partitionId,
--            queueName, status}
--         | {index, type:"ack", success:true, transactionId, error:null, dlq}]}
--   Errors are RAISEd (SQLSTATE P0001) so the caller's transaction rolls back:
--     'Invalid or expired lease' (a required lease not live at the start),
--     'Message not found' / 'Invalid or expired lease' (a failing ack),
--     'Unknown operation type: <t>'.
-- Order of application: all push items in ONE push_items call (partition locks in a
-- single sorted acquisition), then all acks in ONE ack_items call (advisory locks
-- sorted). Push-before-ack everywhere keeps a consistent lock order.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.transaction(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant  uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_ops     jsonb := coalesce(p->'operations', '[]'::jsonb);
    v_push    jsonb := '[]'::jsonb;
    v_acks    jsonb := '[]'::jsonb;
    v_pres    jsonb;
    v_ares    jsonb;
    v_out     jsonb := '[]'::jsonb;
    v_bad     text;
    op        record;
    it        record;
    v_pi      int := 0;
    v_ai      int := 0;
    v_idx     int := 0;
    r         jsonb;
BEGIN
    -- every required lease must be live, on the caller's tenant's partitions,
    -- before anything is applied
    SELECT l INTO v_bad
      FROM jsonb_array_elements_text(coalesce(p->'requiredLeases', '[]'::jsonb)) AS l
     WHERE l IS NOT NULL AND l <> ''
       AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                         JOIN queen.partitions pt ON pt.id = pc.partition_id
                         JOIN queen.queues q ON q.id = pt.queue_id AND q.tenant_id = v_tenant
                        WHERE pc.worker_id = queen.try_uuid(l) AND pc.lease_expires_at > now())
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'Invalid or expired lease';
    END IF;

    FOR op IN SELECT e.v, e.ord FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS e(v, ord) LOOP
        IF op.v->>'type' = 'push' THEN
            v_push := v_push || coalesce(op.v->'items', '[]'::jsonb);
        ELSIF op.v->>'type' = 'ack' THEN
            v_acks := v_acks || jsonb_build_array(op.v);
        ELSE
            RAISE EXCEPTION 'Unknown operation type: %', coalesce(op.v->>'type', 'null');
        END IF;
    END LOOP;

    v_pres := queen.push_items(v_tenant, v_push);
    v_ares := queen.ack_items(v_tenant, v_acks, true);

    -- a failing ack fails the whole transaction (first failure in request order)
    SELECT a->>'error' INTO v_bad
      FROM jsonb_array_elements(v_ares) AS a
     WHERE NOT (a->>'success')::boolean
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%', coalesce(v_bad, 'Acknowledgement failed');
    END IF;

    FOR op IN SELECT e.v FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS e(v, ord) ORDER BY e.ord LOOP
        IF op.v->>'type' = 'push' THEN
            FOR it IN SELECT x.v FROM jsonb_array_elements(coalesce(op.v->'items', '[]'::jsonb))
                                      WITH ORDINALITY AS x(v, ord) ORDER BY x.ord LOOP
                r := v_pres->v_pi;
                v_out := v_out || jsonb_build_array(jsonb_build_object(
                    'index', v_idx, 'type', 'push', 'success', true,
                    'transactionId', r->>'transaction_id',
                    'messageId', r->>'message_id',
                    'partitionId', r->>'partition_id',
                    'queueName', it.v->>'queue',
                    'partition', coalesce(it.v->>'partition', 'Default'),
                    'status', r->>'status'));
                v_pi := v_pi + 1;
                v_idx := v_idx + 1;
            END LOOP;
        ELSE
            r := v_ares->v_ai;
            v_out := v_out || jsonb_build_array(jsonb_build_object(
                'index', v_idx, 'type', 'ack', 'success', true,
                'transactionId', r->>'transactionId',
                'error', NULL,
                'dlq', coalesce((r->>'dlq')::boolean, false)));
            v_ai := v_ai + 1;
            v_idx := v_idx + 1;
        END IF;
    END LOOP;

    -- KV riders (http-api.md §7, §15), indexed after the operations; a failed
    -- required precondition raises so that the pushes and acks roll back too
    -- (the broker reads the object after the 'kv_precondition ' prefix).
    IF jsonb_array_length(coalesce(p->'kv', '[]'::jsonb)) > 0 THEN
        r := queen.kv_apply(v_tenant, p->'kv', v_idx, (p->>'kvMaxRead')::bigint);
        IF r ? 'ok' THEN
            RAISE EXCEPTION 'kv_precondition %', r::text;
        END IF;
        v_out := v_out || (r->'results');
    END IF;

    RETURN jsonb_build_object('success', true, 'results', v_out);
END $$;
