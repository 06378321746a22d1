//! Request bodies: message payloads, transaction ids, push and ack bodies.
//!
//! Bodies are written straight into a reused `Vec<u8>` with `write!`, never
//! through a JSON tree: at batch 100 that is the generator's main per-request
//! cost, and it stays well under a microsecond per item.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// A small, fast, non-cryptographic generator (splitmix64) for transaction ids.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeds from the clock, the process id and a caller-chosen stream number,
    /// so threads and runs never share a sequence.
    pub fn new(stream: u64) -> Rng {
        let t = now_unix_ns();
        Rng(t ^ (u64::from(std::process::id()) << 32) ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Writes a UUIDv4-shaped id (36 characters) into `out`.
    pub fn write_txid(&mut self, out: &mut Vec<u8>) {
        let a = self.next_u64();
        let b = self.next_u64();
        let _ = write!(
            out,
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        );
    }
}

/// Wall-clock time in ns since the Unix epoch (shared by producer and
/// consumer on the same host, so push-to-pop latency needs no clock sync).
pub fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Writes `{"message":"Hello World","seq":N,"ts":T,"pad":"xx…"}` padded so the
/// payload is about `bytes` long (never shorter than the fixed fields).
pub fn write_payload(out: &mut Vec<u8>, seq: u64, ts: u64, bytes: usize) {
    let start = out.len();
    let _ = write!(
        out,
        "{{\"message\":\"Hello World\",\"seq\":{seq},\"ts\":{ts},\"pad\":\""
    );
    let used = out.len() - start + 2;
    out.resize(out.len() + bytes.saturating_sub(used), b'x');
    out.extend_from_slice(b"\"}");
}

/// One item of a push body.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// Queue name (plain ASCII, never needs escaping here).
    pub queue: &'a str,
    /// Partition name.
    pub partition: &'a str,
    /// Sequence number carried in the payload.
    pub seq: u64,
    /// Send timestamp carried in the payload (unix ns).
    pub ts: u64,
}

/// Builds `{"items":[...]}` for `items`, each with a fresh transaction id.
pub fn write_push_body(out: &mut Vec<u8>, rng: &mut Rng, items: &[Item<'_>], payload_bytes: usize) {
    out.clear();
    out.extend_from_slice(b"{\"items\":[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(
            out,
            "{{\"queue\":\"{}\",\"partition\":\"{}\",\"payload\":",
            it.queue, it.partition
        );
        write_payload(out, it.seq, it.ts, payload_bytes);
        out.extend_from_slice(b",\"transactionId\":\"");
        rng.write_txid(out);
        out.extend_from_slice(b"\"}");
    }
    out.extend_from_slice(b"]}");
}

/// One delivery to acknowledge.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// `transactionId` as the broker returned it.
    pub transaction_id: String,
    /// `partitionId` as the broker returned it.
    pub partition_id: String,
    /// The lease the message was delivered under.
    pub lease_id: String,
}

/// Builds an `ack/batch` body with status `completed` for every delivery.
pub fn write_ack_body(out: &mut Vec<u8>, deliveries: &[Delivery], group: Option<&str>) {
    out.clear();
    out.extend_from_slice(b"{\"acknowledgments\":[");
    for (i, d) in deliveries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"transactionId\":");
        json_str(out, &d.transaction_id);
        out.extend_from_slice(b",\"partitionId\":");
        json_str(out, &d.partition_id);
        out.extend_from_slice(b",\"status\":\"completed\",\"leaseId\":");
        json_str(out, &d.lease_id);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"consumerGroup\":");
    match group {
        Some(g) => json_str(out, g),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

/// Appends `s` as a JSON string (ids come back from the broker, so escape).
fn json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json writes a &str as a quoted, escaped JSON string; it cannot fail into a Vec.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_body_is_valid_json_with_sized_payloads() {
        let mut rng = Rng::new(1);
        let mut out = Vec::new();
        let items = [
            Item {
                queue: "q",
                partition: "p0",
                seq: 1,
                ts: 5,
            },
            Item {
                queue: "q",
                partition: "p1",
                seq: 2,
                ts: 6,
            },
        ];
        write_push_body(&mut out, &mut rng, &items, 100);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let arr = v["items"].as_array().unwrap();
        assert_eq!(arr.len(), 2);
        assert_eq!(arr[1]["payload"]["ts"], 6);
        assert_eq!(arr[0]["transactionId"].as_str().unwrap().len(), 36);
        assert_ne!(arr[0]["transactionId"], arr[1]["transactionId"]);
        let p = serde_json::to_string(&arr[0]["payload"]).unwrap();
        assert_eq!(p.len(), 100);
    }

    #[test]
    fn ack_body_is_valid_json() {
        let mut out = Vec::new();
        let d = Delivery {
            transaction_id: "t\"1".into(),
            partition_id: "p".into(),
            lease_id: "l".into(),
        };
        write_ack_body(&mut out, &[d], Some("g"));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["acknowledgments"][0]["transactionId"], "t\"1");
        assert_eq!(v["consumerGroup"], "g");
    }
}
