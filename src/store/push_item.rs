//! One validated push item, as every write path hands it on: the push
//! endpoint, transaction and stream-cycle pushes, a fused push batch, the
//! spool file and its replay.
//!
//! Why a struct and not a JSON tree: a fused batch keeps thousands of items
//! alive while it is in flight, and as `serde_json::Value` maps each cost
//! 1.5–2 KiB (issue 18: most of the broker's peak RSS). Here the names are
//! plain strings, the ids are 16 bytes, and the payload is the JSON text the
//! client sent ([`Payload`], a slice of the request body), checked once and
//! written to PostgreSQL as it came. Serialised, an item has the same shape
//! as the JSON item it replaced (`queue`, `partition`, `id`, `txid`,
//! `traceId`, `payload`, `encrypted`, `sub`), so spool files written before
//! still replay and the SQL procedures that take items as jsonb read the
//! same keys.

pub use super::payload::Payload;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Partition name of an item stored without one.
pub const DEFAULT_PARTITION: &str = "Default";

/// A push item, validated, with its ids minted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushItem {
    /// Queue name (checked).
    pub queue: String,
    /// Partition name (checked; `Default` when the client gave none).
    #[serde(default = "default_partition")]
    pub partition: String,
    /// Message id (UUIDv7, minted by the broker).
    pub id: Uuid,
    /// Transaction id: the client's, or the message id.
    pub txid: String,
    /// Trace id, when the client gave one.
    #[serde(rename = "traceId", default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Uuid>,
    /// The payload's JSON text (JSON `null` when the item had none stored).
    #[serde(default = "Payload::null")]
    pub payload: Payload,
    /// Whether `payload` is an encryption envelope (set by the shard only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub encrypted: bool,
    /// Subject of the token that pushed it (set by the shard only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
}

fn default_partition() -> String {
    DEFAULT_PARTITION.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_item_reads_the_json_item_shape_and_writes_it_back() {
        let old = json!({"queue": "q", "partition": "p",
                         "id": "0193a000-0000-7000-8000-000000000010", "txid": "t",
                         "traceId": "0193A000-0000-7000-8000-000000000001",
                         "payload": {"b": [1, 2], "a": "x"}, "encrypted": true, "sub": "alice"});
        let item: PushItem = serde_json::from_value(old).unwrap();
        assert_eq!(item.queue, "q");
        assert!(item.encrypted);
        assert_eq!(item.sub.as_deref(), Some("alice"));
        let back: serde_json::Value = serde_json::to_value(&item).unwrap();
        assert_eq!(back["payload"], json!({"a": "x", "b": [1, 2]}));
        assert_eq!(back["traceId"], "0193a000-0000-7000-8000-000000000001");
        assert_eq!(back["id"], "0193a000-0000-7000-8000-000000000010");
    }

    #[test]
    fn absent_fields_take_their_defaults_and_stay_absent() {
        let item: PushItem = serde_json::from_str(
            r#"{"queue": "q", "id": "0193a000-0000-7000-8000-000000000010", "txid": "t"}"#,
        )
        .unwrap();
        assert_eq!(item.partition, DEFAULT_PARTITION);
        assert_eq!(item.payload.as_bytes(), b"null");
        let text = serde_json::to_string(&item).unwrap();
        for key in ["traceId", "encrypted", "sub"] {
            assert!(!text.contains(key), "{text}");
        }
    }
}
