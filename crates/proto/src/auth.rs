//! Pre-shared-key authentication of native clients: an HMAC-SHA256 challenge-response.
//!
//! A server with a key puts a fresh random nonce (32 bytes, from the driver) in its hello;
//! the client answers, before its test request, with its own nonce and
//! `HMAC-SHA256(key, "linerate-auth-v1" 0x00 server_nonce client_nonce)`. The server checks
//! the tag in constant time (`hmac`'s `verify_slice`, built on `subtle`) and refuses anything
//! else with one sentence, before any per-test allocation. Fresh server nonces make a
//! recorded answer useless on another connection; the client nonce keeps the tag from
//! being a pure function of the server's choice.
//!
//! What this does not give: secrecy or integrity of the later control messages and data
//! (there is no TLS); an on-path attacker can still hijack an authenticated connection. It
//! keeps strangers from using the server, which is the threat for a public test server.
//!
//! Pure: no I/O, no randomness (nonces come in), nothing is logged; [`Psk`]'s `Debug` never
//! shows the key.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Length of each nonce and of the tag, in bytes.
pub const NONCE_LEN: usize = 32;
/// The shortest key accepted: 16 bytes (128 bits).
pub const MIN_KEY_LEN: usize = 16;
/// Domain separation for the tag.
const LABEL: &[u8] = b"linerate-auth-v1\0";

/// A pre-shared key. Its `Debug` prints only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct Psk(Vec<u8>);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Psk({} bytes, redacted)", self.0.len())
    }
}

impl Psk {
    /// A key from its bytes; at least [`MIN_KEY_LEN`] of them.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(format!(
                "the key has {} bytes; use at least {MIN_KEY_LEN} random bytes (e.g. \
                 `head -c 32 /dev/urandom | base64 > key`)",
                bytes.len()
            ));
        }
        Ok(Self(bytes))
    }

    /// A key from a key file's text: surrounding whitespace (a trailing newline) is not part
    /// of the key.
    pub fn from_file_text(text: &[u8]) -> Result<Self, String> {
        let start = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(text.len());
        let end = text.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |i| i + 1);
        Self::new(text.get(start..end).unwrap_or_default().to_vec())
    }

    /// The client's answer to `server_nonce`.
    pub fn tag(&self, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN]) -> [u8; 32] {
        self.mac(server_nonce, client_nonce).map_or([0; 32], |m| m.finalize().into_bytes().into())
    }

    /// Checks a client's answer in constant time.
    pub fn verify(
        &self,
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
        tag: &[u8],
    ) -> bool {
        self.mac(server_nonce, client_nonce).is_some_and(|m| m.verify_slice(tag).is_ok())
    }

    /// True if `candidate` is this key, compared in constant time (a bearer token, as the
    /// metrics endpoint's `/probe` takes one): each is keyed into an HMAC of the same label
    /// and the tags are compared with `verify_slice`.
    pub fn is(&self, candidate: &[u8]) -> bool {
        let tag = |key: &[u8]| {
            let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).ok()?;
            m.update(b"linerate bearer token");
            Some(m)
        };
        match (tag(&self.0), tag(candidate)) {
            (Some(ours), Some(theirs)) => {
                ours.verify_slice(&theirs.finalize().into_bytes()).is_ok()
            }
            _ => false,
        }
    }

    /// None only if the key were refused, which HMAC never does (it takes any length).
    fn mac(&self, server_nonce: &[u8], client_nonce: &[u8]) -> Option<Hmac<Sha256>> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).ok()?;
        m.update(LABEL);
        m.update(server_nonce);
        m.update(client_nonce);
        Some(m)
    }
}

/// The key and this client's fresh nonce, kept by a client machine until a server asks.
pub type ClientKey = (Psk, [u8; NONCE_LEN]);

/// The `auth` message answering a server's `auth_nonce` (hex) with `key`; refused when this
/// client has no key, a violation when the nonce is malformed.
pub fn answer_challenge(
    key: Option<&ClientKey>,
    server_nonce: &str,
) -> Result<crate::wire::Message, crate::ProtoError> {
    let Some((key, nonce)) = key else {
        return Err(crate::ProtoError::Refused(
            "the server requires a pre-shared key: give this client the server's key with \
             --psk-file"
                .into(),
        ));
    };
    let server_nonce = from_hex::<NONCE_LEN>(server_nonce).ok_or_else(|| {
        crate::ProtoError::Violation("the server's auth_nonce is not 64 hex digits".into())
    })?;
    let tag = to_hex(&key.tag(&server_nonce, nonce));
    Ok(crate::wire::Message::Auth { client_nonce: to_hex(nonce), tag })
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `N` bytes from `2N` hex digits; None for anything else.
pub fn from_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let bytes = s.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let hi = (*pair.first()? as char).to_digit(16)?;
        let lo = (*pair.get(1)? as char).to_digit(16)?;
        *o = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_verify_only_with_the_same_key_and_nonces() {
        let k = Psk::new(b"0123456789abcdef".to_vec()).expect("key");
        let (s, c) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let t = k.tag(&s, &c);
        assert!(k.verify(&s, &c, &t));
        assert!(!k.verify(&[3; NONCE_LEN], &c, &t), "another server nonce");
        assert!(!k.verify(&s, &[3; NONCE_LEN], &t), "another client nonce");
        assert!(!k.verify(&s, &c, &t[..31]), "a truncated tag");
        let other = Psk::new(b"0123456789abcdeX".to_vec()).expect("key");
        assert!(!other.verify(&s, &c, &t));
    }

    #[test]
    fn golden_tag() {
        // HMAC-SHA256(key="0123456789abcdef", "linerate-auth-v1\0" || 0x01*32 || 0x02*32),
        // computed independently with Python's hmac module.
        let k = Psk::new(b"0123456789abcdef".to_vec()).expect("key");
        assert_eq!(
            to_hex(&k.tag(&[1; NONCE_LEN], &[2; NONCE_LEN])),
            "2b2f9cea4d6e630240f8a37a8e4a3f0605d69bcd9deb2d09fefac119b03d03bb"
        );
    }

    #[test]
    fn short_keys_are_refused_and_files_are_trimmed_and_debug_redacts() {
        assert!(Psk::new(b"short".to_vec()).unwrap_err().contains("at least 16"));
        let k = Psk::from_file_text(b"  0123456789abcdef\n").expect("key");
        assert_eq!(k, Psk::new(b"0123456789abcdef".to_vec()).expect("key"));
        assert_eq!(format!("{k:?}"), "Psk(16 bytes, redacted)");
    }

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        assert_eq!(from_hex::<2>(&to_hex(&[0xab, 0x01])), Some([0xab, 0x01]));
        assert_eq!(from_hex::<2>("abc"), None);
        assert_eq!(from_hex::<2>("zz00"), None);
        assert_eq!(from_hex::<1>("é"), None);
    }
}
