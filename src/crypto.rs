//! Payload encryption at rest (security.md B4, semantics.md §13):
//! AES-256-GCM with a fresh random 16-byte IV per payload, a 16-byte tag,
//! no associated data, stored as `{"encrypted", "iv", "authTag"}` (standard
//! base64 with padding). The plaintext is the JSON text of the payload.
//!
//! The key (`QUEEN_ENCRYPTION_KEY`, 64 hex chars) is parsed once at boot
//! on the main thread; a malformed key disables encryption with a warning,
//! never stops the broker. Encryption and decryption run on the shards:
//! they are a few microseconds for ordinary payloads and never block.

use aes_gcm::aead::consts::U16;
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::aes::Aes256;
use aes_gcm::AesGcm;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::RngCore;
use serde_json::{json, Map, Value};
use std::fmt;
use std::sync::OnceLock;

/// IV length in bytes (semantics.md §13: 16, not GCM's usual 12).
pub const IV_LEN: usize = 16;
/// GCM tag length in bytes.
pub const TAG_LEN: usize = 16;
/// Key length in hex characters (32 bytes).
pub const KEY_HEX_LEN: usize = 64;

/// AES-256-GCM with a 16-byte nonce.
type Gcm16 = AesGcm<Aes256, U16>;

/// The broker's payload cipher (key schedule ready). Its `Debug` hides the key.
#[derive(Clone)]
pub struct Cipher {
    /// The keyed cipher.
    gcm: Gcm16,
}

impl fmt::Debug for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cipher(AES-256-GCM, key hidden)")
    }
}

/// What `QUEEN_ENCRYPTION_KEY` gave at boot.
#[derive(Debug, Clone)]
pub enum KeyState {
    /// Not set: encryption off.
    Unset,
    /// Set but unusable: encryption off, with this warning (never the key).
    Invalid(String),
    /// A usable key (boxed: the key schedule is large).
    Valid(Box<Cipher>),
}

impl KeyState {
    /// Reads `QUEEN_ENCRYPTION_KEY`.
    pub fn from_env(env: &crate::env::Env) -> KeyState {
        KeyState::parse(env.string("QUEEN_ENCRYPTION_KEY").as_deref())
    }

    /// Parses the variable's value.
    pub fn parse(value: Option<&str>) -> KeyState {
        let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return KeyState::Unset;
        };
        if v.len() != KEY_HEX_LEN {
            return KeyState::Invalid(format!(
                "QUEEN_ENCRYPTION_KEY must be {KEY_HEX_LEN} hex characters (has {}): encryption disabled",
                v.chars().count()
            ));
        }
        if !v.bytes().all(|b| b.is_ascii_hexdigit()) {
            return KeyState::Invalid(
                "QUEEN_ENCRYPTION_KEY is not hexadecimal: encryption disabled".into(),
            );
        }
        // 64 ASCII hex digits (both checked above) decode to exactly 32 bytes.
        let Some(key) = crate::env::decode_hex(v).filter(|k| k.len() == KEY_HEX_LEN / 2) else {
            return KeyState::Invalid(
                "QUEEN_ENCRYPTION_KEY is not hexadecimal: encryption disabled".into(),
            );
        };
        KeyState::Valid(Box::new(Cipher {
            gcm: Gcm16::new(GenericArray::from_slice(&key)),
        }))
    }

    /// The cipher, when the key is usable.
    pub fn cipher(&self) -> Option<&Cipher> {
        match self {
            KeyState::Valid(c) => Some(c.as_ref()),
            _ => None,
        }
    }

    /// How the boot block shows it.
    pub fn label(&self) -> &'static str {
        match self {
            KeyState::Unset => "<unset>",
            KeyState::Invalid(_) => "<set:invalid>",
            KeyState::Valid(_) => "<set:64 chars>",
        }
    }
}

/// Whether `v` has exactly the envelope's shape.
pub fn is_envelope(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.len() == 3
                && ["encrypted", "iv", "authTag"]
                    .iter()
                    .all(|k| m.get(*k).is_some_and(Value::is_string))
        }
        _ => false,
    }
}

impl Cipher {
    /// The envelope of `payload`. `None` only if AES-GCM refuses (it does
    /// not for inputs under 64 GiB); the caller then stores plaintext.
    pub fn encrypt(&self, payload: &Value) -> Option<Value> {
        self.encrypt_text(payload.to_string().as_bytes())
    }

    /// The envelope of a payload given as its JSON text (decryption gives
    /// back the value that text holds).
    pub fn encrypt_text(&self, plain: &[u8]) -> Option<Value> {
        let mut iv = [0u8; IV_LEN];
        rand::thread_rng().fill_bytes(&mut iv);
        let mut out = self
            .gcm
            .encrypt(GenericArray::from_slice(&iv), plain)
            .ok()?;
        let tag = out.split_off(out.len().checked_sub(TAG_LEN)?);
        Some(json!({
            "encrypted": B64.encode(&out),
            "iv": B64.encode(iv),
            "authTag": B64.encode(tag),
        }))
    }

    /// The payload inside `envelope`; `None` when it is not an envelope or
    /// does not authenticate (the caller returns the stored value as is).
    pub fn decrypt(&self, envelope: &Value) -> Option<Value> {
        if !is_envelope(envelope) {
            return None;
        }
        let field = |k: &str| B64.decode(envelope[k].as_str().unwrap_or("")).ok();
        let iv = field("iv").filter(|iv| iv.len() == IV_LEN)?;
        let mut data = field("encrypted")?;
        let tag = field("authTag").filter(|t| t.len() == TAG_LEN)?;
        data.extend_from_slice(&tag);
        let plain = self
            .gcm
            .decrypt(GenericArray::from_slice(&iv), data.as_slice())
            .ok()?;
        serde_json::from_slice(&plain).ok()
    }
}

/// The process's cipher, installed once at boot by `main` (read-only
/// afterwards, so any thread reads it without a lock). Process-wide, not a
/// shard's: one key serves every shard and the spool replay alike.
static CIPHER: OnceLock<Option<Cipher>> = OnceLock::new();

/// Installs the boot key state (first call wins).
pub fn install(state: &KeyState) {
    let _ = CIPHER.set(state.cipher().cloned());
}

/// The cipher, when a valid key was installed.
pub fn cipher() -> Option<&'static Cipher> {
    CIPHER.get().and_then(Option::as_ref)
}

/// Readies one stored message for a client: drops the `isEncrypted` flag
/// and decrypts `data` when flagged or shaped as an envelope.
pub fn open_message(m: &mut Map<String, Value>) {
    let flagged = m
        .remove("isEncrypted")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    if let Some(data) = m.get_mut("data") {
        open_in_place(cipher(), data, flagged);
    }
}

/// Decrypts `data` in place when the row is flagged or the value has the
/// envelope's shape (semantics.md §13); a failure leaves it as stored and
/// logs (never the payload).
pub fn open_in_place(cipher: Option<&Cipher>, data: &mut Value, flagged: bool) {
    if !(flagged || is_envelope(data)) {
        return;
    }
    let Some(c) = cipher else {
        if flagged {
            log::warn!("an encrypted payload was read but no valid QUEEN_ENCRYPTION_KEY is set");
        }
        return;
    };
    match c.decrypt(data) {
        Some(v) => *data = v,
        None => log::warn!("an encrypted payload did not decrypt; returned as stored"),
    }
}

/// A stored payload's JSON text as the client gets it: `None` when it goes
/// out as stored (neither flagged nor shaped as an envelope), else the text
/// of what [`open_in_place`] makes of it. Only a text naming `"authTag"` can
/// be an envelope, so an unflagged plain payload costs one substring search
/// and is never parsed (the pop answer keeps payloads as text, issue 18).
pub fn open_text(cipher: Option<&Cipher>, text: &str, flagged: bool) -> Option<String> {
    if !flagged && !text.contains("\"authTag\"") {
        return None;
    }
    let mut v: Value = serde_json::from_str(text).ok()?;
    if !(flagged || is_envelope(&v)) {
        return None;
    }
    open_in_place(cipher, &mut v, flagged);
    Some(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher() -> Cipher {
        KeyState::parse(Some(&"0f".repeat(32)))
            .cipher()
            .cloned()
            .expect("valid key")
    }

    #[test]
    fn round_trip_with_16_byte_iv() {
        let c = cipher();
        let p = json!({"secret": "attack at dawn", "n": [1, 2]});
        let e = c.encrypt(&p).expect("encrypts");
        assert!(is_envelope(&e));
        assert!(!e.to_string().contains("attack"));
        let iv = B64.decode(e["iv"].as_str().unwrap()).unwrap();
        assert_eq!(iv.len(), 16);
        assert_eq!(c.decrypt(&e), Some(p));
    }

    #[test]
    fn tampering_fails_closed() {
        let c = cipher();
        let mut e = c.encrypt(&json!("x")).unwrap();
        e["authTag"] = json!(B64.encode([0u8; 16]));
        assert_eq!(c.decrypt(&e), None);
    }

    #[test]
    fn open_text_passes_plain_payloads_and_opens_envelopes() {
        let c = cipher();
        assert_eq!(open_text(Some(&c), r#"{"a":1}"#, false), None);
        let e = c.encrypt(&json!({"b": 2, "a": "x"})).unwrap().to_string();
        assert_eq!(
            open_text(Some(&c), &e, false).as_deref(),
            Some(r#"{"a":"x","b":2}"#)
        );
        assert_eq!(
            open_text(Some(&c), &e, true).as_deref(),
            Some(r#"{"a":"x","b":2}"#)
        );
        // names authTag but is no envelope: as stored
        assert_eq!(open_text(Some(&c), r#"{"authTag":"t"}"#, false), None);
        // flagged without a key: the stored value, as before
        assert_eq!(
            open_text(None, &e, true),
            serde_json::from_str::<Value>(&e)
                .ok()
                .map(|v| v.to_string())
        );
    }

    #[test]
    fn bad_keys_disable() {
        assert!(matches!(KeyState::parse(None), KeyState::Unset));
        assert!(matches!(KeyState::parse(Some("abc")), KeyState::Invalid(_)));
        assert!(matches!(
            KeyState::parse(Some(&"zz".repeat(32))),
            KeyState::Invalid(_)
        ));
    }
}
