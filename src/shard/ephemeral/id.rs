//! Ephemeral message ids: opaque to clients, and everything an ack needs to
//! find its delivery without a lookup table: the owning broker's boot nonce
//! (its incarnation: an id from before a restart answers `stale`), the
//! message's sequence number on its shard, the delivery's attempt, and the
//! partition name (the ack body names only the queue; the partition picks
//! the owning broker and shard).
//!
//! Shape (inferred; semantics.md §21 only says ids encode the incarnation):
//! `{boot:016x}{seq:016x}{attempt:08x}.{partition, base64url without padding}`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// A decoded id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgId {
    /// Boot nonce of the broker that delivered it.
    pub boot: u64,
    /// Sequence number on the partition's shard.
    pub seq: u64,
    /// Delivery attempt (1 = first).
    pub attempt: u32,
    /// Partition name.
    pub partition: String,
}

/// Hex digits before the dot.
const HEAD: usize = 16 + 16 + 8;

impl MsgId {
    /// The wire form.
    pub fn encode(boot: u64, seq: u64, attempt: u32, partition: &str) -> String {
        format!(
            "{boot:016x}{seq:016x}{attempt:08x}.{}",
            URL_SAFE_NO_PAD.encode(partition.as_bytes())
        )
    }

    /// Parses the wire form; `None` for anything this broker did not mint.
    pub fn decode(s: &str) -> Option<MsgId> {
        let (head, tail) = s.split_once('.')?;
        if head.len() != HEAD || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let partition = String::from_utf8(URL_SAFE_NO_PAD.decode(tail).ok()?).ok()?;
        Some(MsgId {
            boot: u64::from_str_radix(&head[..16], 16).ok()?,
            seq: u64::from_str_radix(&head[16..32], 16).ok()?,
            attempt: u32::from_str_radix(&head[32..], 16).ok()?,
            partition,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let s = MsgId::encode(0xfeed, 42, 3, "room/7 é");
        let id = MsgId::decode(&s).unwrap();
        assert_eq!((id.boot, id.seq, id.attempt), (0xfeed, 42, 3));
        assert_eq!(id.partition, "room/7 é");
        assert_eq!(MsgId::decode("nope"), None);
        assert_eq!(MsgId::decode(&s.replace('.', "")), None);
        assert_eq!(MsgId::decode(&format!("{}!", s)), None);
    }
}
