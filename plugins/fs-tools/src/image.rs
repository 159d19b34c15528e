//! `read_image`: an image file as an image content block.
//!
//! The canonical value is small (path, type, size, SHA-256): the host caps
//! values at `max_argument_bytes` (1 MiB by default), and an image in
//! base64 would not fit. `render` reads the file again and checks that it
//! is still the file `execute` saw (same size and digest); if it changed in
//! between, the result is an error, never another picture.

use std::fs;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolgate_sdk::{Annotations, Call, Content, ContentBlock, Schema, Tool, ToolError};

use crate::paths::{display, regular_file, relative};

/// Largest image returned (the size most model APIs accept per image).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Widest (and tallest) image returned, in pixels: larger ones are refused
/// by model APIs, and a decoder would allocate for every pixel — a 5 MiB
/// PNG can declare 65535×65535 (16 GiB of pixels).
pub const MAX_IMAGE_SIDE: u32 = 8192;
/// Most pixels (width × height) of an image returned: 32 Mi (33,554,432;
/// an 8K frame, 7680×4320 = 33,177,600, fits).
pub const MAX_IMAGE_PIXELS: u64 = 32 << 20;

/// An image's width and height, from its header (PNG's `IHDR`, JPEG's
/// start-of-frame, GIF's logical screen, WebP's `VP8 `/`VP8L`/`VP8X`).
/// `None` when the header is not there to read.
pub fn dimensions(data: &[u8], mime: &str) -> Option<(u32, u32)> {
    let be16 = |i: usize| Some(u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?]) as u32);
    let le16 = |i: usize| Some(u16::from_le_bytes([*data.get(i)?, *data.get(i + 1)?]) as u32);
    let be32 = |i: usize| {
        Some(u32::from_be_bytes([
            *data.get(i)?,
            *data.get(i + 1)?,
            *data.get(i + 2)?,
            *data.get(i + 3)?,
        ]))
    };
    let le24 = |i: usize| {
        Some(u32::from_le_bytes([
            *data.get(i)?,
            *data.get(i + 1)?,
            *data.get(i + 2)?,
            0,
        ]))
    };
    match mime {
        // Signature (8), then the first chunk must be IHDR: length (4),
        // type (4), width (4), height (4), big-endian.
        "image/png" => {
            if data.get(12..16)? != b"IHDR" {
                return None;
            }
            Some((be32(16)?, be32(20)?))
        }
        "image/gif" => Some((le16(6)?, le16(8)?)),
        "image/jpeg" => {
            // Segments after SOI: FF marker, then a big-endian length that
            // counts itself; the first start-of-frame holds the size.
            let mut i = 2;
            loop {
                while *data.get(i)? != 0xff {
                    i += 1;
                }
                while *data.get(i)? == 0xff {
                    i += 1;
                }
                let marker = *data.get(i)?;
                i += 1;
                match marker {
                    // Markers without a length.
                    0x01 | 0xd0..=0xd7 => continue,
                    // Start of scan or end of image before any frame.
                    0xd9 | 0xda => return None,
                    0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                        // Length (2), precision (1), height (2), width (2).
                        return Some((be16(i + 5)?, be16(i + 3)?));
                    }
                    _ => i += be16(i)? as usize,
                }
            }
        }
        "image/webp" => match data.get(12..16)? {
            // Lossy: frame tag (3), start code 9d 01 2a, 14-bit sizes.
            b"VP8 " => {
                if data.get(23..26)? != [0x9d, 0x01, 0x2a] {
                    return None;
                }
                Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff))
            }
            // Lossless: signature 0x2f, then 14 bits of width − 1 and
            // 14 bits of height − 1.
            b"VP8L" => {
                if *data.get(20)? != 0x2f {
                    return None;
                }
                let bits = u32::from_le_bytes(data.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            // Extended: flags (4), then 24 bits of canvas width − 1 and of
            // height − 1.
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        },
        _ => None,
    }
}

/// Refuses an image whose header declares more than the host passes on
/// ([`MAX_IMAGE_SIDE`], [`MAX_IMAGE_PIXELS`]), none, or no readable size.
fn check_dimensions(data: &[u8], mime: &str, shown: &str) -> Result<(), ToolError> {
    let Some((w, h)) = dimensions(data, mime) else {
        return Err(ToolError::new(
            "UNSUPPORTED_TYPE",
            format!(
                "`{shown}` looks like {mime} but its header does not say its size (truncated or damaged); it is not passed on"
            ),
        ));
    };
    if w == 0 || h == 0 {
        return Err(ToolError::new(
            "UNSUPPORTED_TYPE",
            format!("`{shown}` declares an empty image ({w}×{h} pixels)"),
        ));
    }
    let pixels = u64::from(w) * u64::from(h);
    if w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE || pixels > MAX_IMAGE_PIXELS {
        return Err(ToolError::new(
            "TOO_LARGE",
            format!(
                "`{shown}` declares {w}×{h} pixels; read_image passes on images of at most {MAX_IMAGE_SIDE} pixels a side and {MAX_IMAGE_PIXELS} pixels in all (scale it down first)"
            ),
        ));
    }
    Ok(())
}

/// Show an image file (PNG, JPEG, GIF or WebP, up to 5 MiB and 8192 pixels
/// a side) to the model.
/// The path is relative to the working directory.
#[derive(Deserialize, Schema)]
pub struct ReadImage {
    /// The image file, relative to the working directory.
    path: String,
}

/// The image that was read.
#[derive(Serialize, Deserialize, Schema)]
pub struct ImageInfo {
    /// The file, relative to the working directory.
    path: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    mime_type: String,
    /// Its size in bytes.
    bytes: u64,
    /// Its SHA-256, hex.
    sha256: String,
}

fn load(path: &str) -> Result<(String, Vec<u8>, &'static str), ToolError> {
    let p = relative(path)?;
    let shown = display(&p);
    let meta = regular_file(&p, &shown, "read_image")?;
    if meta.len() > MAX_IMAGE_BYTES {
        return Err(ToolError::new(
            "TOO_LARGE",
            format!(
                "`{shown}` is {} bytes; read_image returns images of at most {MAX_IMAGE_BYTES} bytes (5 MiB)",
                meta.len()
            ),
        ));
    }
    let data = fs::read(&p)?;
    let Some(mime) = crate::kind::sniff(&data) else {
        return Err(ToolError::new(
            "UNSUPPORTED_TYPE",
            format!(
                "`{shown}` is not a PNG, JPEG, GIF or WebP image{}",
                if crate::kind::binary_kind(&data).is_none() {
                    " (it looks like text: use read)"
                } else {
                    ""
                }
            ),
        ));
    };
    check_dimensions(&data, mime, &shown)?;
    Ok((shown, data, mime))
}

fn digest(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Tool for ReadImage {
    const NAME: &'static str = "read_image";
    type Output = ImageInfo;

    fn execute(self, _call: &Call) -> Result<ImageInfo, ToolError> {
        let (path, data, mime) = load(&self.path)?;
        Ok(ImageInfo {
            path,
            mime_type: mime.into(),
            bytes: data.len() as u64,
            sha256: digest(&data),
        })
    }

    fn render(v: ImageInfo) -> Vec<ContentBlock> {
        match load(&v.path) {
            Ok((_, data, mime)) if digest(&data) == v.sha256 && mime == v.mime_type => {
                vec![Content::image(data, mime)]
            }
            Ok(_) => vec![Content::text(format!(
                "(`{}` changed after it was read; read it again)",
                v.path
            ))],
            Err(e) => vec![Content::text(format!(
                "(`{}` cannot be shown: {})",
                v.path,
                e.message()
            ))],
        }
    }

    fn output_schema() -> Option<serde_json::Value> {
        Some(ImageInfo::schema())
    }

    fn annotations() -> Annotations {
        Annotations::READ_ONLY | Annotations::IDEMPOTENT
    }

    fn is_concurrency_safe(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut d = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        d.extend(w.to_be_bytes());
        d.extend(h.to_be_bytes());
        d.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        d
    }

    #[test]
    fn headers_give_the_size_of_each_kind() {
        assert_eq!(
            dimensions(&png(65535, 65535), "image/png"),
            Some((65535, 65535))
        );
        let gif = b"GIF89a\x10\x00\x20\x00\xf0\0\0";
        assert_eq!(dimensions(gif, "image/gif"), Some((16, 32)));
        // SOI, an APP0 of 16 bytes, then SOF0: length 17, precision 8,
        // height 600, width 800.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0, 16];
        jpeg.extend([0u8; 14]);
        jpeg.extend([0xff, 0xc0, 0, 17, 8, 0x02, 0x58, 0x03, 0x20]);
        assert_eq!(dimensions(&jpeg, "image/jpeg"), Some((800, 600)));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        vp8x.extend([0xff, 0xff, 0xff, 0x01, 0x00, 0x00]);
        assert_eq!(dimensions(&vp8x, "image/webp"), Some((1 << 24, 2)));
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        vp8l.extend(((9u32) | (19u32 << 14)).to_le_bytes());
        assert_eq!(dimensions(&vp8l, "image/webp"), Some((10, 20)));
        // Truncated headers say nothing.
        assert_eq!(dimensions(&png(1, 1)[..18], "image/png"), None);
        assert_eq!(dimensions(&[0xff, 0xd8, 0xff, 0xda], "image/jpeg"), None);
    }

    #[test]
    fn huge_or_empty_images_are_refused_before_they_are_passed_on() {
        let e = check_dimensions(&png(65535, 65535), "image/png", "x.png").unwrap_err();
        assert!(
            e.message().contains("65535×65535") && e.message().contains("8192"),
            "{}",
            e.message()
        );
        assert!(check_dimensions(&png(8192, 4096), "image/png", "x.png").is_ok());
        assert!(
            check_dimensions(&png(8192, 8192), "image/png", "x.png").is_err(),
            "64 Mi pixels"
        );
        assert!(check_dimensions(&png(0, 10), "image/png", "x.png").is_err());
        assert!(check_dimensions(&png(1, 1)[..18], "image/png", "x.png").is_err());
    }
}
