//! A size as the user wrote it (`--window 256k`, `--length 1.5M`): the bytes that are applied,
//! and the words that label the matrix cell, so `256k` is shown as `w=256k` and never as the
//! `w=250K` the same 256 000 bytes would canonically read.
//!
//! Two sizes are equal when their bytes are: `w=256k` and `w=250K` (how versions before this
//! one stored the label) name one cell. JSON carries the bytes only (`"value": 256000`); the
//! words live in the labels, which is what is stored and read back.
//!
//! Pure: no I/O. Must not decide what a size means for a test (that is the plan's business).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units::{UnitError, parse_size};

/// Longest spelling kept; longer ones (nobody writes them) fall back to the canonical label.
const MAX_WORDS: usize = 15;

/// A byte count and, when they differ from the canonical label, the user's words for it.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    bytes: u64,
    /// The words' bytes (ASCII, no whitespace), `len` of them; `len` 0 = canonical.
    text: [u8; MAX_WORDS],
    len: u8,
}

impl Size {
    /// `bytes`, labelled canonically (`800k`, `64K`, `1500`).
    pub fn of_bytes(bytes: u64) -> Self {
        Self { bytes, text: [0; MAX_WORDS], len: 0 }
    }

    /// The size `words` names, keeping the words (without whitespace) as its label.
    pub fn spelled(words: &str) -> Result<Self, UnitError> {
        let bytes = parse_size(words)?.bytes();
        let compact: String = words.chars().filter(|c| !c.is_whitespace()).collect();
        let mut size = Self::of_bytes(bytes);
        if compact.is_ascii() && compact.len() <= MAX_WORDS && compact != canonical(bytes) {
            size.text[..compact.len()].copy_from_slice(compact.as_bytes());
            size.len = compact.len() as u8;
        }
        Ok(size)
    }

    /// The byte count.
    pub fn bytes(self) -> u64 {
        self.bytes
    }

    /// The same bytes, labelled canonically (for comparing plans across spellings).
    pub fn canonical(self) -> Self {
        Self::of_bytes(self.bytes)
    }

    /// The user's words, or the canonical label.
    pub fn label(&self) -> String {
        match std::str::from_utf8(&self.text[..usize::from(self.len)]) {
            Ok(words) if !words.is_empty() => words.to_string(),
            _ => canonical(self.bytes),
        }
    }
}

impl PartialEq for Size {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Size {}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.bytes)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(Self::of_bytes)
    }
}

/// Sizes as people write them when nothing else is known: 800 000 is `800k`, 65 536 is `64K`
/// (binary first, so a value that is both reads as the binary one).
pub fn canonical(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1000 * 1000 && b % (1000 * 1000) == 0 => format!("{}m", b / 1_000_000),
        b if b >= 1024 && b % 1024 == 0 => format!("{}K", b >> 10),
        b if b >= 1000 && b % 1000 == 0 => format!("{}k", b / 1000),
        b => b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_kept_and_bytes_decide_equality() {
        let s = Size::spelled("256k").expect("size");
        assert_eq!((s.bytes(), s.label()), (256_000, "256k".to_string()));
        assert_eq!(Size::of_bytes(256_000).label(), "250K", "the canonical label of the bytes");
        assert_eq!(s, Size::of_bytes(256_000));
        assert_eq!(Size::spelled("1.5M").expect("size").label(), "1.5M");
        assert_eq!(Size::spelled(" 64 K ").expect("size").label(), "64K");
        assert_eq!(Size::spelled("65536").expect("size").label(), "65536");
        let long = Size::spelled("1234567890123456K").expect("size");
        assert_eq!(long.label(), canonical(long.bytes()), "too long to keep: canonical");
        assert!(Size::spelled("12Q").is_err());
        assert_eq!(serde_json::to_string(&s).expect("json"), "256000");
        assert_eq!(serde_json::from_str::<Size>("256000").expect("json").label(), "250K");
    }

    #[test]
    fn canonical_labels_keep_the_unit_people_wrote() {
        assert_eq!(canonical(800_000), "800k");
        assert_eq!(canonical(65_536), "64K");
        assert_eq!(canonical(4 << 20), "4M");
        assert_eq!(canonical(1500), "1500");
    }
}
