//! The hash chain: how a record line is made from its body, and hashed.
//!
//! A line is `{"seq":N,"prev":"<64 hex>",…body…}`: the sequence number and
//! the SHA-256 (hex) of the previous line's exact bytes come first, spliced
//! in front of the body's own fields, so that the writer serialises the
//! body outside its lock and only numbers and links it inside. A record's
//! hash is the SHA-256 of its line's exact bytes (without the newline): one
//! byte changed anywhere changes it, so the next record no longer links.

use sha2::{Digest, Sha256};

/// The `prev` of the first record of a new chain.
pub const GENESIS: [u8; 32] = [0; 32];

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Append the lower-case hex of `bytes` to `out`.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
}

/// The bytes of lower-case or upper-case hex text of exactly `N` bytes.
pub fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.trim();
    if text.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// The line of record `seq` linked to `prev`, from `body` (a JSON object
/// with at least one field).
pub fn splice(seq: u64, prev: &[u8; 32], body: &str) -> String {
    let mut line = String::with_capacity(body.len() + 96);
    splice_into(&mut line, seq, prev, body);
    line
}

/// [`splice`], appended to `out` (the writer builds a batch's lines in
/// one buffer, without a copy per line).
pub fn splice_into(out: &mut String, seq: u64, prev: &[u8; 32], body: &str) {
    use std::fmt::Write;
    debug_assert!(body.starts_with('{') && body.len() > 2);
    out.push_str("{\"seq\":");
    let _ = write!(out, "{seq}");
    out.push_str(",\"prev\":\"");
    push_hex(out, prev);
    out.push_str("\",");
    out.push_str(&body[1..]);
}

/// The signed form of a checkpoint line: `unsigned` with a last field
/// `"sig"` holding the signature (hex) of `unsigned`'s bytes.
pub fn append_sig(unsigned: &str, sig: &[u8; 64]) -> String {
    let mut line = String::with_capacity(unsigned.len() + 140);
    line.push_str(&unsigned[..unsigned.len() - 1]);
    line.push_str(",\"sig\":\"");
    line.push_str(&hex(sig));
    line.push_str("\"}");
    line
}

/// The unsigned form of a signed checkpoint line, and its signature: the
/// inverse of [`append_sig`], exactly (anything else is not a signed line).
pub fn split_sig(line: &str) -> Option<(String, [u8; 64])> {
    const TAIL: usize = ",\"sig\":\"".len() + 128 + "\"}".len();
    if line.len() < TAIL + 2 || !line.is_char_boundary(line.len() - TAIL) {
        return None;
    }
    let (head, tail) = line.split_at(line.len() - TAIL);
    let hex_sig = tail.strip_prefix(",\"sig\":\"")?.strip_suffix("\"}")?;
    let sig = unhex::<64>(hex_sig)?;
    Some((format!("{head}}}"), sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_puts_seq_and_prev_first() {
        let line = splice(7, &GENESIS, r#"{"kind":"call"}"#);
        assert_eq!(
            line,
            format!(r#"{{"seq":7,"prev":"{}","kind":"call"}}"#, "0".repeat(64))
        );
    }

    #[test]
    fn sig_round_trips_exactly() {
        let unsigned = r#"{"seq":1,"kind":"checkpoint"}"#;
        let signed = append_sig(unsigned, &[0xab; 64]);
        assert_eq!(split_sig(&signed), Some((unsigned.to_string(), [0xab; 64])));
        assert_eq!(split_sig(unsigned), None);
        assert_eq!(unhex::<2>("0aFf"), Some([0x0a, 0xff]));
        assert_eq!(unhex::<2>("0aF"), None);
    }
}
