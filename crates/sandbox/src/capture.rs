//! Keeps a command's output stream in memory without letting it grow without
//! bound: the first [`HEAD_BYTES`] and the last [`TAIL_BYTES`] are kept, and
//! what falls between is counted and replaced by one marker line. Both
//! backends read their commands' output through this.

use std::collections::VecDeque;
use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes kept from the start of a stream.
pub const HEAD_BYTES: usize = 4 * 1024 * 1024;
/// Bytes kept from the end of a stream.
pub const TAIL_BYTES: usize = 4 * 1024 * 1024;
/// The most a step keeps of one output stream (a step file, and the
/// session's copy): what any tool returns beyond it is cut in the middle.
pub const MAX_STORED_BYTES: usize = 16 * 1024 * 1024;

/// `bytes` if they fit in `cap`; else their start and end, `cap / 2` bytes
/// each, around a marker line saying how much was dropped.
pub fn bounded(bytes: Vec<u8>, cap: usize) -> Vec<u8> {
    if bytes.len() <= cap {
        return bytes;
    }
    let mut capture = Capture::with_limits(cap / 2, cap - cap / 2);
    capture.push(&bytes);
    capture.finish().0
}

/// One stream's kept bytes while it is being read.
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    dropped: u64,
}

impl Default for Capture {
    /// A capture that keeps [`HEAD_BYTES`] + [`TAIL_BYTES`] at most.
    fn default() -> Capture {
        Capture::with_limits(HEAD_BYTES, TAIL_BYTES)
    }
}

impl Capture {
    pub fn with_limits(head_cap: usize, tail_cap: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            dropped: 0,
        }
    }

    /// Adds the next chunk of the stream.
    pub fn push(&mut self, data: &[u8]) {
        let room = self.head_cap - self.head.len();
        let (to_head, rest) = data.split_at(room.min(data.len()));
        self.head.extend_from_slice(to_head);
        if rest.is_empty() {
            return;
        }
        if rest.len() >= self.tail_cap {
            let cut = rest.len() - self.tail_cap;
            self.dropped += (self.tail.len() + cut) as u64;
            self.tail.clear();
            self.tail.extend(&rest[cut..]);
        } else {
            let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.dropped += overflow as u64;
            self.tail.extend(rest);
        }
    }

    /// The kept bytes (with a marker line where bytes were cut) and how many
    /// bytes were cut.
    pub fn finish(self) -> (Vec<u8>, u64) {
        let mut out = self.head;
        if self.dropped > 0 {
            let marker = format!("\n[ah: {} bytes of output dropped here]\n", self.dropped);
            out.extend_from_slice(marker.as_bytes());
        }
        out.extend(self.tail);
        (out, self.dropped)
    }
}

/// Reads `stream` to its end into `capture`.
pub async fn pump(mut stream: impl AsyncRead + Unpin, capture: &mut Capture) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        capture.push(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut capture = Capture::with_limits(4, 3);
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.finish()
    }

    #[test]
    fn short_output_is_kept_whole() {
        assert_eq!(captured(&[b"ab", b"cdef"]), (b"abcdef".to_vec(), 0));
        assert_eq!(captured(&[b"abcdefg"]), (b"abcdefg".to_vec(), 0));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_rest() {
        let (out, dropped) = captured(&[b"abcdefgh", b"ij", b"k"]);
        assert_eq!(dropped, 4);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "abcd\n[ah: 4 bytes of output dropped here]\nijk");
    }

    #[test]
    fn stored_output_is_bounded_with_a_marker() {
        assert_eq!(bounded(b"abcdef".to_vec(), 6), b"abcdef");
        let out = String::from_utf8(bounded(b"abcdefghij".to_vec(), 4)).unwrap();
        assert_eq!(out, "ab\n[ah: 6 bytes of output dropped here]\nij");
    }

    #[test]
    fn a_chunk_larger_than_the_tail_replaces_it() {
        let (out, dropped) = captured(&[b"abcdxy", b"0123456789"]);
        assert_eq!(dropped, 2 + 7);
        assert!(out.starts_with(b"abcd\n"));
        assert!(out.ends_with(b"\n789"));
    }
}
