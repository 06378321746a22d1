-- Key/value store (issue 14, http-api.md §15) and the KV/timers kill switches
-- (http-api.md §13, SEC-23).

-- ---------------------------------------------------------------------------
-- queen.kv_switch_get() -> {kvEnabled, timersScheduleEnabled, timersFireEnabled}
--   A missing row counts as on.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_switch_get() RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'kvEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'kv_enabled'), true),
        'timersScheduleEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'timers_schedule_enabled'), true),
        'timersFireEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'timers_fire_enabled'), true))
$$;

-- ---------------------------------------------------------------------------
-- queen.kv_switch_set({kvEnabled?, timersScheduleEnabled?, timersFireEnabled?})
--   -> the three values after the change (as kv_switch_get). Absent = unchanged.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_switch_set(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.system_state (key, value, updated_at)
    SELECT s.key, jsonb_build_object('enabled', (p->>s.field)::boolean), now()
      FROM (VALUES ('kv_enabled', 'kvEnabled'),
                   ('timers_schedule_enabled', 'timersScheduleEnabled'),
                   ('timers_fire_enabled', 'timersFireEnabled')) AS s(key, field)
     WHERE jsonb_typeof(p->s.field) = 'boolean'
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
    RETURN queen.kv_switch_get();
END $$;

-- ---------------------------------------------------------------------------
-- queen.kv_sweep(p_limit) -> rows deleted: at most p_limit keys past their
--   expiry, skipping rows a KV call holds (SKIP LOCKED), so sweepers on several
--   brokers and live calls never wait on each other.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_sweep(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH victims AS (
        SELECT tenant_id, namespace, key FROM queen.kv
         WHERE expires_at IS NOT NULL AND expires_at <= now()
         ORDER BY expires_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM queen.kv k USING victims v
         WHERE k.tenant_id = v.tenant_id AND k.namespace = v.namespace AND k.key = v.key
           AND k.expires_at <= now()
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;

-- ---------------------------------------------------------------------------
-- queen.kv_row(key, value, version, expires_at, updated_at, with_value)
--   -> {key, value?, version, expiresAt, updatedAt}: one row of a read answer.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_row(k text, v jsonb, ver bigint, exp timestamptz,
                                        upd timestamptz, with_value boolean) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN with_value
        THEN jsonb_build_object('key', k, 'value', v, 'version', ver,
                                'expiresAt', queen.iso(exp), 'updatedAt', queen.iso(upd))
        ELSE jsonb_build_object('key', k, 'version', ver,
                                'expiresAt', queen.iso(exp), 'updatedAt', queen.iso(upd))
    END
$$;

-- ---------------------------------------------------------------------------
-- queen.kv_apply(tenant, ops, base, max_read) -> {results:[...]}
--                                             | {ok:false, reason:"kv_precondition", ...}
--   ops are the broker's validated, normalised ops (src/api/kv/ops.rs), applied
--   in order; each sees the effects of the ones before. Every result carries
--   index = base + its position, and op. Shapes: http-api.md §15.
--   Writes lock the key's row (SELECT ... FOR UPDATE) before testing their
--   precondition, so concurrent writers of one key serialise and each tests the
--   row as the one before left it; a key not there is inserted ON CONFLICT DO
--   NOTHING, and losing that race re-runs the op against the winner's row.
--   An expired row is treated as absent by every op (and overwritten by a write).
--   A {required:true} op that does not apply stops the call and answers the
--   precondition object: the CALLER must roll back what earlier ops wrote
--   (queen.kv_call and queen.transaction do).
--   max_read bounds the bytes of values read by getMany/getPrefix (truncated).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_apply(p_tenant uuid, p_ops jsonb, p_base int, p_max_read bigint)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    o        jsonb;
    v_pos    int := 0;
    v_out    jsonb := '[]'::jsonb;
    r        jsonb;
    v_read   bigint := 0;
    cur      record;
    v_found  boolean;
    v_live   boolean;
    v_reason text;
    v_ns     text;
    v_key    text;
    v_val    jsonb;
    v_exp    timestamptz;
    v_ver    bigint;
    v_n      numeric;
    v_rows   jsonb;
    v_miss   jsonb;
    v_trunc  boolean;
    v_last   text;
    v_limit  int;
    v_count  int;
    v_size   bigint;
    v_kopt   boolean;
    k        text;
BEGIN
    FOR o IN SELECT e FROM jsonb_array_elements(p_ops) AS e LOOP
        v_ns := o->>'ns';
        v_key := o->>'key';
        v_reason := NULL;
        IF o->>'op' = 'get' THEN
            SELECT kv.value, kv.version, kv.expires_at, kv.updated_at INTO cur
              FROM queen.kv kv
             WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns AND kv.key = v_key
               AND (kv.expires_at IS NULL OR kv.expires_at > now());
            IF FOUND THEN
                v_read := v_read + octet_length(cur.value::text);
                r := jsonb_build_object('found', true, 'key', v_key, 'value', cur.value,
                        'version', cur.version, 'expiresAt', queen.iso(cur.expires_at),
                        'updatedAt', queen.iso(cur.updated_at));
            ELSE
                r := jsonb_build_object('found', false, 'key', v_key);
            END IF;
        ELSIF o->>'op' = 'getMany' THEN
            v_rows := '[]'::jsonb; v_miss := '[]'::jsonb; v_trunc := false;
            FOR k IN SELECT x FROM jsonb_array_elements_text(o->'keys') WITH ORDINALITY AS t(x, n) ORDER BY n LOOP
                SELECT kv.value, kv.version, kv.expires_at, kv.updated_at INTO cur
                  FROM queen.kv kv
                 WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns AND kv.key = k
                   AND (kv.expires_at IS NULL OR kv.expires_at > now());
                IF FOUND THEN
                    v_size := octet_length(cur.value::text);
                    IF v_read + v_size > p_max_read THEN
                        v_trunc := true;
                        EXIT;
                    END IF;
                    v_read := v_read + v_size;
                    v_rows := v_rows || jsonb_build_array(queen.kv_row(k, cur.value, cur.version,
                                            cur.expires_at, cur.updated_at, true));
                ELSE
                    v_miss := v_miss || to_jsonb(k);
                END IF;
            END LOOP;
            r := jsonb_build_object('rows', v_rows, 'missing', v_miss, 'truncated', v_trunc);
        ELSIF o->>'op' = 'getPrefix' THEN
            v_rows := '[]'::jsonb; v_trunc := false; v_last := NULL; v_count := 0;
            v_limit := (o->>'limit')::int;
            v_kopt := coalesce((o->>'keysOnly')::boolean, false);
            FOR cur IN
                SELECT kv.key, kv.value, kv.version, kv.expires_at, kv.updated_at
                  FROM queen.kv kv
                 WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns
                   AND kv.key >= (o->>'prefix') AND kv.key < (o->>'prefix') || chr(1114111)
                   AND starts_with(kv.key, o->>'prefix')
                   AND (o->>'after' IS NULL OR kv.key > (o->>'after'))
                   AND (kv.expires_at IS NULL OR kv.expires_at > now())
                 ORDER BY kv.key
                 LIMIT v_limit + 1
            LOOP
                IF v_count = v_limit THEN
                    v_trunc := true;
                    EXIT;
                END IF;
                IF NOT v_kopt THEN
                    v_size := octet_length(cur.value::text);
                    IF v_read + v_size > p_max_read THEN
                        v_trunc := true;
                        EXIT;
                    END IF;
                    v_read := v_read + v_size;
                END IF;
                v_rows := v_rows || jsonb_build_array(queen.kv_row(cur.key, cur.value, cur.version,
                                        cur.expires_at, cur.updated_at, NOT v_kopt));
                v_last := cur.key;
                v_count := v_count + 1;
            END LOOP;
            r := jsonb_build_object('rows', v_rows, 'truncated', v_trunc,
                                    'nextAfter', CASE WHEN v_trunc THEN v_last END);
        ELSE
            -- writes: put / putIfAbsent / delete / incr
            LOOP
                SELECT kv.value, kv.version, kv.expires_at INTO cur
                  FROM queen.kv kv
                 WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns AND kv.key = v_key
                   FOR UPDATE;
                v_found := FOUND;
                v_live := v_found AND (cur.expires_at IS NULL OR cur.expires_at > now());
                v_reason := NULL;
                -- the precondition
                IF o ? 'expect' THEN
                    IF (o->>'expect')::bigint = 0 THEN
                        IF v_live THEN v_reason := 'exists'; END IF;
                    ELSIF NOT v_live THEN
                        v_reason := 'absent';
                    ELSIF cur.version <> (o->>'expect')::bigint THEN
                        v_reason := 'version';
                    END IF;
                END IF;
                IF v_reason IS NULL AND o->>'op' = 'delete' AND NOT v_live THEN
                    v_reason := 'absent';
                END IF;
                -- the new value and expiry
                IF v_reason IS NULL AND o->>'op' = 'incr' THEN
                    IF v_live THEN
                        IF jsonb_typeof(cur.value) <> 'number'
                           OR (cur.value::text)::numeric <> trunc((cur.value::text)::numeric) THEN
                            v_reason := 'type';
                        ELSE
                            v_n := (cur.value::text)::numeric;
                        END IF;
                    ELSE
                        v_n := 0;
                    END IF;
                    IF v_reason IS NULL THEN
                        v_n := v_n + (o->>'delta')::numeric;
                        IF (o->>'min' IS NOT NULL AND v_n < (o->>'min')::numeric)
                           OR (o->>'max' IS NOT NULL AND v_n > (o->>'max')::numeric)
                           OR v_n > 9223372036854775807 OR v_n < -9223372036854775808 THEN
                            v_reason := 'limit';
                        END IF;
                    END IF;
                    v_val := to_jsonb(v_n);
                    -- incr keeps a live key's expiry; the given one applies on creation
                    v_exp := CASE WHEN v_live THEN cur.expires_at
                                  WHEN o->>'ttl' IS NULL THEN NULL
                                  ELSE now() + (o->>'ttl')::bigint * interval '1 second' END;
                ELSE
                    v_val := o->'value';
                    v_exp := CASE WHEN o->>'ttl' IS NULL THEN NULL
                                  ELSE now() + (o->>'ttl')::bigint * interval '1 second' END;
                END IF;
                IF v_reason IS NOT NULL THEN
                    r := jsonb_build_object('applied', false, 'reason', v_reason, 'key', v_key,
                            'value', CASE WHEN v_live THEN cur.value END,
                            'version', CASE WHEN v_live THEN cur.version END);
                    EXIT;
                END IF;
                IF o->>'op' = 'delete' THEN
                    DELETE FROM queen.kv kv
                     WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns AND kv.key = v_key;
                    r := jsonb_build_object('applied', true, 'key', v_key, 'value', NULL, 'version', NULL);
                    EXIT;
                END IF;
                v_ver := nextval('queen.kv_version_seq');
                IF v_found THEN
                    UPDATE queen.kv kv
                       SET value = v_val, version = v_ver, expires_at = v_exp, updated_at = now(),
                           created_at = CASE WHEN v_live THEN kv.created_at ELSE now() END
                     WHERE kv.tenant_id = p_tenant AND kv.namespace = v_ns AND kv.key = v_key;
                ELSE
                    INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at, shard)
                    VALUES (p_tenant, v_ns, v_key, v_val, v_ver, v_exp, (abs(hashtext(v_key)) % 16)::smallint)
                    ON CONFLICT DO NOTHING;
                    IF NOT FOUND THEN
                        CONTINUE;  -- another call inserted it first: test its row
                    END IF;
                END IF;
                r := jsonb_build_object('applied', true, 'key', v_key, 'value', v_val, 'version', v_ver);
                EXIT;
            END LOOP;
            IF v_reason IS NOT NULL AND coalesce((o->>'required')::boolean, false) THEN
                RETURN jsonb_build_object('ok', false, 'reason', 'kv_precondition',
                        'failedIndex', p_base + v_pos, 'kvReason', v_reason,
                        'version', r->'version', 'value', r->'value');
            END IF;
        END IF;
        v_out := v_out || jsonb_build_array(
                     jsonb_build_object('index', p_base + v_pos, 'op', o->>'op') || r);
        v_pos := v_pos + 1;
    END LOOP;
    RETURN jsonb_build_object('results', v_out);
END $$;

-- ---------------------------------------------------------------------------
-- queen.kv_call(tenant, ops, max_read, has_required) -> as queen.kv_apply
--   POST /api/v1/kv: one call = this one statement's transaction. When an op
--   is required, the ops run in a subtransaction that a failed precondition
--   rolls back, so nothing of the call is applied and the answer is the
--   precondition object.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_call(p_tenant text, p_ops jsonb, p_max_read bigint,
                                         p_has_required boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    r jsonb;
BEGIN
    IF NOT p_has_required THEN
        RETURN queen.kv_apply(p_tenant::uuid, p_ops, 0, p_max_read);
    END IF;
    BEGIN
        r := queen.kv_apply(p_tenant::uuid, p_ops, 0, p_max_read);
        IF r ? 'ok' THEN
            RAISE EXCEPTION USING ERRCODE = 'QK001';
        END IF;
    EXCEPTION WHEN SQLSTATE 'QK001' THEN
        RETURN r;
    END;
    RETURN r;
END $$;

-- ---------------------------------------------------------------------------
-- queen.kv_group(calls) -> [{r: result} | {sqlstate, message}]: the group
--   commit of the KV pool (src/store/kv_group.rs). calls: [{kind: "kv"|"lock",
--   tenant, ops, maxRead, hasRequired}], each run as queen.kv_call or
--   queen.lock_apply inside its own exception block, i.e. its own savepoint:
--   released when the call returns, rolled back to when it raises (a deadlock,
--   a lock timeout, ...), so a failed call applies nothing and the others still
--   apply; its SQLSTATE and text come back in its place (the broker logs the
--   text and never shows it to a client). One statement, so one implicit
--   transaction: the whole group commits, or (the statement itself failing:
--   statement timeout, lost connection) none of it.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_group(p_calls jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c     jsonb;
    r     jsonb;
    v_out jsonb[] := '{}';
BEGIN
    FOR c IN SELECT e FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS t(e, n) ORDER BY n LOOP
        BEGIN
            IF c->>'kind' = 'lock' THEN
                r := jsonb_build_object('r', queen.lock_apply(c->>'tenant', c->'ops'));
            ELSE
                r := jsonb_build_object('r', queen.kv_call(c->>'tenant', c->'ops',
                        (c->>'maxRead')::bigint, (c->>'hasRequired')::boolean));
            END IF;
        EXCEPTION WHEN OTHERS THEN
            r := jsonb_build_object('sqlstate', SQLSTATE, 'message', SQLERRM);
        END;
        v_out := v_out || r;
    END LOOP;
    RETURN to_jsonb(v_out);
END $$;

-- ---------------------------------------------------------------------------
-- queen.kv_namespaces({tenant}) -> {namespaces:[{namespace, rows}]}: live keys
--   per namespace (the dashboard's KV browser, GET /api/v1/resources/kv/namespaces).
-- queen.kv_list({tenant, ns, after?, limit}) -> {rows:[{key, version, expiresAt,
--   updatedAt}], truncated, nextAfter}: a keyset page of one namespace.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_namespaces(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('namespaces', coalesce(jsonb_agg(
               jsonb_build_object('namespace', namespace, 'rows', n) ORDER BY namespace), '[]'::jsonb))
      FROM (SELECT namespace, count(*) AS n FROM queen.kv
             WHERE tenant_id = (p->>'tenant')::uuid
               AND (expires_at IS NULL OR expires_at > now())
             GROUP BY namespace) s
$$;

CREATE OR REPLACE FUNCTION queen.kv_list(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH page AS (
        SELECT key, version, expires_at, updated_at FROM queen.kv
         WHERE tenant_id = (p->>'tenant')::uuid AND namespace = p->>'ns'
           AND (p->>'after' IS NULL OR key > p->>'after')
           AND (expires_at IS NULL OR expires_at > now())
         ORDER BY key
         LIMIT (p->>'limit')::int + 1
    ), numbered AS (
        SELECT *, row_number() OVER (ORDER BY key) AS rn FROM page
    )
    SELECT jsonb_build_object(
        'rows', coalesce((SELECT jsonb_agg(queen.kv_row(key, NULL, version, expires_at, updated_at, false)
                                           ORDER BY key)
                            FROM numbered WHERE rn <= (p->>'limit')::int), '[]'::jsonb),
        'truncated', (SELECT count(*) FROM page) > (p->>'limit')::int,
        'nextAfter', CASE WHEN (SELECT count(*) FROM page) > (p->>'limit')::int
                          THEN (SELECT key FROM numbered WHERE rn = (p->>'limit')::int) END)
$$;

-- ---------------------------------------------------------------------------
-- queen.lock_apply(tenant, ops) -> {results:[...]}: locks on the KV (http-api.md
--   §17), rows of queen.kv in the reserved namespace '_locks' (a name no KV call
--   can use: namespaces start with [a-z0-9]). value = {"owner": <holder>};
--   token = the row's version, minted by acquire and kept by renew.
--   ops (validated by src/api/locks.rs):
--     {op:"acquire", name, ttl, owner} -> {acquired, token, expiresAt, holder}
--       (not acquired: the current holder and expiry, token null)
--     {op:"renew", name, token, ttl}   -> {renewed, expiresAt}
--     {op:"release", name, token}      -> {released}
--     {op:"get", name}                 -> {held, holder, expiresAt}
--   An expired lock is free: acquire takes it over, renew/release refuse it.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.lock_apply(p_tenant text, p_ops jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_t    uuid := p_tenant::uuid;
    o      jsonb;
    cur    record;
    r      jsonb;
    v_out  jsonb := '[]'::jsonb;
    v_ver  bigint;
    v_exp  timestamptz;
    v_pos  int := 0;
BEGIN
    FOR o IN SELECT e FROM jsonb_array_elements(p_ops) AS e LOOP
        IF o->>'op' = 'acquire' THEN
            LOOP
                SELECT kv.value, kv.expires_at INTO cur FROM queen.kv kv
                 WHERE kv.tenant_id = v_t AND kv.namespace = '_locks' AND kv.key = o->>'name'
                   FOR UPDATE;
                IF FOUND AND (cur.expires_at IS NULL OR cur.expires_at > now()) THEN
                    r := jsonb_build_object('acquired', false, 'token', NULL,
                            'holder', cur.value->'owner', 'expiresAt', queen.iso(cur.expires_at));
                    EXIT;
                END IF;
                v_ver := nextval('queen.kv_version_seq');
                v_exp := now() + (o->>'ttl')::bigint * interval '1 second';
                IF FOUND THEN
                    UPDATE queen.kv kv SET value = jsonb_build_object('owner', o->'owner'),
                           version = v_ver, expires_at = v_exp, updated_at = now(), created_at = now()
                     WHERE kv.tenant_id = v_t AND kv.namespace = '_locks' AND kv.key = o->>'name';
                ELSE
                    INSERT INTO queen.kv (tenant_id, namespace, key, value, version, expires_at, shard)
                    VALUES (v_t, '_locks', o->>'name', jsonb_build_object('owner', o->'owner'), v_ver,
                            v_exp, (abs(hashtext(o->>'name')) % 16)::smallint)
                    ON CONFLICT DO NOTHING;
                    IF NOT FOUND THEN
                        CONTINUE;
                    END IF;
                END IF;
                r := jsonb_build_object('acquired', true, 'token', v_ver, 'holder', o->'owner',
                                        'expiresAt', queen.iso(v_exp));
                EXIT;
            END LOOP;
        ELSIF o->>'op' = 'renew' THEN
            UPDATE queen.kv kv SET expires_at = now() + (o->>'ttl')::bigint * interval '1 second',
                   updated_at = now()
             WHERE kv.tenant_id = v_t AND kv.namespace = '_locks' AND kv.key = o->>'name'
               AND kv.version = (o->>'token')::bigint AND kv.expires_at > now()
            RETURNING kv.expires_at INTO v_exp;
            r := jsonb_build_object('renewed', FOUND, 'expiresAt', queen.iso(v_exp));
        ELSIF o->>'op' = 'release' THEN
            DELETE FROM queen.kv kv
             WHERE kv.tenant_id = v_t AND kv.namespace = '_locks' AND kv.key = o->>'name'
               AND kv.version = (o->>'token')::bigint AND kv.expires_at > now();
            r := jsonb_build_object('released', FOUND);
        ELSE
            SELECT kv.value, kv.expires_at INTO cur FROM queen.kv kv
             WHERE kv.tenant_id = v_t AND kv.namespace = '_locks' AND kv.key = o->>'name'
               AND kv.expires_at > now();
            IF FOUND THEN
                r := jsonb_build_object('held', true, 'holder', cur.value->'owner',
                                        'expiresAt', queen.iso(cur.expires_at));
            ELSE
                r := jsonb_build_object('held', false, 'holder', NULL, 'expiresAt', NULL);
            END IF;
        END IF;
        v_out := v_out || jsonb_build_array(
                     jsonb_build_object('index', v_pos, 'op', o->>'op', 'name', o->>'name') || r);
        v_pos := v_pos + 1;
    END LOOP;
    RETURN jsonb_build_object('results', v_out);
END $$;
