-- Throughput check helpers. A JSON text template per batch size is built once; each pgbench
-- transaction only substitutes a fresh 8-hex-digit counter (ids stay UUIDv7-shaped and
-- increasing, txids unique) and casts the text to jsonb, as the broker's parameter would be.
CREATE TABLE IF NOT EXISTS qt.plain (
    id uuid PRIMARY KEY,
    transaction_id text NOT NULL,
    trace_id uuid,
    partition_id uuid NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    is_encrypted boolean NOT NULL DEFAULT false,
    producer_sub text,
    UNIQUE (partition_id, transaction_id));
CREATE INDEX IF NOT EXISTS plain_pos ON qt.plain (partition_id, created_at, id);
CREATE SEQUENCE IF NOT EXISTS qt.bench_seq START 4096;

-- n items over 10 partitions of bench.q
CREATE OR REPLACE FUNCTION qt.bench_prepare(n int) RETURNS void LANGUAGE sql AS $$
  SELECT queen.configure('{"queue":"bench.q"}');
  SELECT qt.put('tpl:' || n, to_jsonb(jsonb_build_object('items', jsonb_agg(jsonb_build_object(
           'queue', 'bench.q', 'partition', 'p' || (g % 10),
           'id', 'AAAAAAAA-0000-7000-8000-' || lpad(to_hex(g), 12, '0'),
           'txid', 'AAAAAAAA-' || g,
           'traceId', NULL, 'payload', '{"message":"hello world","n":12345,"ok":true}'::jsonb,
           'encrypted', false, 'sub', NULL) ORDER BY g))::text))
    FROM generate_series(1, n) g;
$$;
