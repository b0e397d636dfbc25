//! The type-of-service values iperf3 users type: `-S/--tos` as a C integer (decimal, `0x` hex,
//! leading-`0` octal, 0..=255, as iperf3 reads it with `strtol(…, 0)`), and `--dscp` as a
//! DiffServ codepoint name (EF, AF41, CS1, …, and iperf3's legacy `lowdelay`, `throughput`,
//! `reliability`) or number 0..=63 in the same bases, which becomes the TOS byte DSCP << 2.

/// Named codepoints as TOS bytes (RFC 2474, RFC 5865 `va`, RFC 1349's legacy bits): the
/// names iperf3's `--dscp` accepts, compared without regard to case.
const NAMES: &[(&str, u8)] = &[
    ("af11", 0x28),
    ("af12", 0x30),
    ("af13", 0x38),
    ("af21", 0x48),
    ("af22", 0x50),
    ("af23", 0x58),
    ("af31", 0x68),
    ("af32", 0x70),
    ("af33", 0x78),
    ("af41", 0x88),
    ("af42", 0x90),
    ("af43", 0x98),
    ("cs0", 0x00),
    ("cs1", 0x20),
    ("cs2", 0x40),
    ("cs3", 0x60),
    ("cs4", 0x80),
    ("cs5", 0xa0),
    ("cs6", 0xc0),
    ("cs7", 0xe0),
    ("ef", 0xb8),
    ("va", 0xb0),
    ("lowdelay", 0x10),
    ("throughput", 0x08),
    ("reliability", 0x04),
];

/// A C-style integer: `0x`/`0X` hex, a leading `0` octal, else decimal.
fn c_integer(s: &str) -> Option<u32> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

/// `-S/--tos`: the TOS byte.
pub(super) fn tos(s: &str) -> Result<u8, String> {
    c_integer(s).and_then(|v| u8::try_from(v).ok()).ok_or_else(|| {
        format!(
            "{s:?} is not a type-of-service byte: give 0..255 as decimal, hex (0xb8) or octal \
             (0270), or use --dscp with a name such as EF or AF41"
        )
    })
}

/// `--dscp`: a codepoint name or number, as the TOS byte it gives.
pub(super) fn dscp(s: &str) -> Result<u8, String> {
    if let Some((_, v)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s.trim())) {
        return Ok(*v);
    }
    match c_integer(s) {
        Some(v) if v <= 63 => Ok((v as u8) << 2),
        _ => Err(format!(
            "{s:?} is not a DSCP: give a number 0..63 (decimal, 0x hex or 0 octal) or a name: \
             EF, VA, AF11..AF43, CS0..CS7 (or use -S for a raw TOS byte)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_takes_decimal_hex_and_octal_as_iperf3() {
        assert_eq!(tos("184"), Ok(184));
        assert_eq!(tos("0xb8"), Ok(0xb8));
        assert_eq!(tos("0XB8"), Ok(0xb8));
        assert_eq!(tos("0270"), Ok(0o270));
        assert_eq!(tos("0"), Ok(0));
        for bad in ["256", "-1", "0x100", "09", "ef", ""] {
            assert!(tos(bad).unwrap_err().contains("0..255"), "{bad}");
        }
    }

    #[test]
    fn dscp_takes_names_and_numbers_as_tos_bytes() {
        assert_eq!(dscp("EF"), Ok(0xb8));
        assert_eq!(dscp("af41"), Ok(0x88));
        assert_eq!(dscp("CS1"), Ok(0x20));
        assert_eq!(dscp("46"), Ok(46 << 2));
        assert_eq!(dscp("0x2e"), Ok(0xb8));
        assert_eq!(dscp("056"), Ok(0xb8));
        assert_eq!(dscp("63"), Ok(252));
        for bad in ["64", "af44", "cs8", "-1", ""] {
            assert!(dscp(bad).unwrap_err().contains("0..63"), "{bad}");
        }
    }

    /// Every named codepoint is its number shifted into the TOS byte's upper six bits.
    #[test]
    fn named_codepoints_agree_with_their_numbers() {
        for (name, number) in [("ef", 46), ("af11", 10), ("af43", 38), ("cs7", 56), ("va", 44)] {
            assert_eq!(dscp(name), dscp(&number.to_string()), "{name}");
        }
    }
}
