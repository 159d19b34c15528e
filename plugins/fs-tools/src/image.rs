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

/// Show an image file (PNG, JPEG, GIF or WebP, up to 5 MiB) to the model.
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
    let Some(mime) = sniff(&data) else {
        return Err(ToolError::new(
            "UNSUPPORTED_TYPE",
            format!(
                "`{shown}` is not a PNG, JPEG, GIF or WebP image{}",
                if crate::read::binary_kind(&data).is_none() {
                    " (it looks like text: use read)"
                } else {
                    ""
                }
            ),
        ));
    };
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
