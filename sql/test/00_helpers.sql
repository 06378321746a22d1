-- Test helpers (schema qt, test-only).
CREATE SCHEMA IF NOT EXISTS qt;
CREATE SEQUENCE IF NOT EXISTS qt.seq;
CREATE TABLE IF NOT EXISTS qt.kv (k text PRIMARY KEY, v jsonb);
CREATE TABLE IF NOT EXISTS qt.consumed (id text);

-- UUIDv7-shaped, strictly increasing in call order (ms prefix + global sequence).
CREATE OR REPLACE FUNCTION qt.uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
          || '7000' || '8' || lpad(to_hex(nextval('qt.seq')), 15, '0'))::uuid $$;

CREATE OR REPLACE FUNCTION qt.items(q text, part text, txids text[]) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE r jsonb := '[]'; t text;
BEGIN
  FOREACH t IN ARRAY txids LOOP
    r := r || jsonb_build_array(jsonb_build_object('queue', q, 'partition', part, 'id', qt.uuid7(),
                'txid', t, 'traceId', NULL, 'payload', jsonb_build_object('t', t),
                'encrypted', false, 'sub', NULL));
  END LOOP;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION qt.push(q text, part text, txids text[]) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$ SELECT queen.push_batch(jsonb_build_object('items', qt.items(q, part, txids))) $$;

CREATE OR REPLACE FUNCTION qt.push_n(q text, part text, prefix text, n int) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
  SELECT qt.push(q, part, ARRAY(SELECT prefix || g FROM generate_series(1, n) g)) $$;

CREATE OR REPLACE FUNCTION qt.pop(q text, grp text, batch int, extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
  SELECT queen.pop(jsonb_build_object('queue', q, 'group', grp, 'batch', batch, 'partitions', 1,
                                      'autoAck', false, 'subMode', 'all', 'leaseId', qt.uuid7()) || extra) $$;

CREATE OR REPLACE FUNCTION qt.pid(q text, part text DEFAULT 'Default') RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT pt.id FROM queen.partitions pt JOIN queen.queues qq ON qq.id = pt.queue_id
   WHERE qq.name = q AND pt.name = part $$;

CREATE OR REPLACE FUNCTION qt.ack(pid uuid, txid text, status text, grp text,
                                  lease text DEFAULT NULL, err text DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
  SELECT queen.ack_batch(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
           'transactionId', txid, 'partitionId', pid, 'status', status, 'group', grp,
           'leaseId', lease, 'error', err))))->0 $$;

CREATE OR REPLACE FUNCTION qt.cursor(q text, grp text, part text DEFAULT 'Default') RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT m.transaction_id FROM queen.partition_consumers pc
    JOIN queen.messages m ON m.id = pc.last_consumed_id
   WHERE pc.partition_id = qt.pid(q, part) AND pc.consumer_group = grp $$;

CREATE OR REPLACE FUNCTION qt.txids(r jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(string_agg(m->>'transactionId', ',' ORDER BY o), '')
    FROM jsonb_array_elements(r->'messages') WITH ORDINALITY AS x(m, o) $$;

CREATE OR REPLACE FUNCTION qt.put(key text, val jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO qt.kv VALUES (key, val) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v $$;
CREATE OR REPLACE FUNCTION qt.get(key text) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT v FROM qt.kv WHERE k = key $$;

CREATE OR REPLACE FUNCTION qt.txset(r jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(string_agg(m->>'transactionId', ',' ORDER BY m->>'transactionId'), '')
    FROM jsonb_array_elements(r->'messages') AS x(m) $$;
