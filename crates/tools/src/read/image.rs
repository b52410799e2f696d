//! Pictures for `read`: a PNG, JPEG, GIF or WebP is known by its first
//! bytes, its size in pixels read from its header (no decoding), and it
//! goes to the model as an image when it is within what the APIs take:
//! at most [`MAX_BYTES`] (its base64 then stays under the 5 MB an image
//! may be) and [`MAX_SIDE`] pixels a side. A larger one is refused with
//! its numbers, never cut or scaled. A request carries only the most recent
//! pictures, [`PER_REQUEST`] and [`REQUEST_BYTES`] at most (the agent's
//! requests apply it).

/// The largest image sent, in bytes.
pub const MAX_BYTES: u64 = 3_750_000;
/// The longest side sent, in pixels.
pub const MAX_SIDE: u32 = 8_000;
/// The most pictures one request carries: past 20 images in one request,
/// Anthropic takes none over 2000 pixels a side (ah sends up to
/// [`MAX_SIDE`]).
pub const PER_REQUEST: usize = 20;
/// The most bytes of base64 the pictures of one request have. Anthropic
/// takes requests of at most 32 MB (OpenAI, 50 MB of images); 20 MB, four
/// pictures of [`MAX_BYTES`] or many more screenshots, leaves 12 MB for the
/// rest of the conversation, more than a window of a million tokens holds.
pub const REQUEST_BYTES: u64 = 20_000_000;
/// Bytes looked at to know a picture and its size.
pub const SNIFF: usize = 64 * 1024;

/// A picture's kind and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Picture {
    pub media_type: &'static str,
    pub width: u32,
    pub height: u32,
}

/// The picture `head` (the file's first bytes) starts, if it is one ah
/// sends; `Err` for a picture whose header gives no size.
pub fn sniff(head: &[u8]) -> Option<Result<Picture, &'static str>> {
    let be16 = |at: usize| {
        head.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as u32)
    };
    let le16 = |at: usize| {
        head.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)
    };
    let be32 = |at: usize| {
        head.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let picture = |media_type, size: Option<(u32, u32)>| {
        Some(
            size.map(|(width, height)| Picture {
                media_type,
                width,
                height,
            })
            .ok_or(media_type),
        )
    };
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        return picture("image/png", be32(16).zip(be32(20)));
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        return picture("image/gif", le16(6).zip(le16(8)));
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        let size = match head.get(12..16) {
            Some(b"VP8 ") => le16(26)
                .zip(le16(28))
                .map(|(w, h)| (w & 0x3fff, h & 0x3fff)),
            Some(b"VP8L") => head.get(21..25).map(|b| {
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
            }),
            Some(b"VP8X") => head.get(24..30).map(|b| {
                let w = u32::from_le_bytes([b[0], b[1], b[2], 0]) + 1;
                let h = u32::from_le_bytes([b[3], b[4], b[5], 0]) + 1;
                (w, h)
            }),
            _ => None,
        };
        return picture("image/webp", size);
    }
    if head.starts_with(b"\xff\xd8\xff") {
        // The first start-of-frame marker holds the size; other segments
        // are skipped by their lengths.
        let mut at = 2;
        while at + 4 <= head.len() {
            if head[at] != 0xff {
                break;
            }
            let marker = head[at + 1];
            let is_frame = (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker);
            if is_frame {
                return picture("image/jpeg", be16(at + 7).zip(be16(at + 5)));
            }
            let Some(length) = be16(at + 2) else { break };
            at += 2 + length as usize;
        }
        return picture("image/jpeg", None);
    }
    None
}

/// Why `picture` of `bytes` bytes is not sent, if it is not.
pub fn refusal(picture: &Picture, bytes: u64) -> Option<String> {
    if bytes > MAX_BYTES {
        return Some(format!(
            "it is {} KB; ah sends images of at most {} KB (refused, not scaled: make a \
             smaller copy with bash if you need to see it)",
            bytes.div_ceil(1000),
            MAX_BYTES / 1000
        ));
    }
    if picture.width > MAX_SIDE
        || picture.height > MAX_SIDE
        || picture.width == 0
        || picture.height == 0
    {
        return Some(format!(
            "it is {}×{} pixels; ah sends images of at most {MAX_SIDE} pixels a side \
             (refused, not scaled)",
            picture.width, picture.height
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG.
    pub(crate) const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn each_kind_is_known_with_its_size() {
        let png = sniff(PNG).unwrap().unwrap();
        assert_eq!((png.media_type, png.width, png.height), ("image/png", 3, 2));
        let gif = sniff(b"GIF89a\x05\x00\x07\x00rest").unwrap().unwrap();
        assert_eq!((gif.media_type, gif.width, gif.height), ("image/gif", 5, 7));
        let mut jpeg = b"\xff\xd8\xff\xe0\x00\x04ab".to_vec();
        jpeg.extend(b"\xff\xc0\x00\x11\x08\x00\x20\x00\x40");
        let jpeg = sniff(&jpeg).unwrap().unwrap();
        assert_eq!(
            (jpeg.media_type, jpeg.width, jpeg.height),
            ("image/jpeg", 64, 32)
        );
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend([0u8; 8]);
        webp.extend([9, 0, 0, 4, 0, 0]);
        let webp = sniff(&webp).unwrap().unwrap();
        assert_eq!(
            (webp.media_type, webp.width, webp.height),
            ("image/webp", 10, 5)
        );
        assert_eq!(sniff(b"hello world"), None);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n"), Some(Err("image/png")));
    }

    #[test]
    fn too_big_is_refused_with_its_numbers() {
        let small = Picture {
            media_type: "image/png",
            width: 100,
            height: 100,
        };
        assert_eq!(refusal(&small, 1000), None);
        assert!(
            refusal(&small, MAX_BYTES + 1)
                .unwrap()
                .contains("at most 3750 KB")
        );
        let wide = Picture {
            width: 9000,
            ..small
        };
        assert!(refusal(&wide, 10).unwrap().contains("9000×100 pixels"));
    }
}
