//! What a file is, from its first bytes: an image (`read_image`) or
//! binary (`read` refuses both). Shared by `read` and `image`, which name
//! it and not each other.

/// Bytes looked at for a NUL byte (the binary test, as git and ripgrep do).
pub const SNIFF_BYTES: usize = 8192;

/// The image type of a file, from its first bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[0..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// What the first bytes of a file say it is, when it is not text.
pub fn binary_kind(head: &[u8]) -> Option<&'static str> {
    if let Some(mime) = sniff(head) {
        return Some(mime);
    }
    let sniff = &head[..head.len().min(SNIFF_BYTES)];
    if sniff.contains(&0) {
        return Some("binary");
    }
    None
}
