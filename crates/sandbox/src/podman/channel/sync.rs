//! The changes of `/work` over the channel, for a sandbox whose files the
//! host cannot see (a remote engine): [`Channel::scan`] asks the agent
//! what commands changed and hands each entry and its bytes to a
//! [`Sink`] (the host's mirror), [`Channel::put`] sends the host's own
//! changes. What the agent sends is hostile: every entry is bounded in
//! count, bytes and time here, and checked again by the sink; a scan cut
//! short leaves the channel unusable, and its caller fails closed.

use std::time::Duration;

use tokio::time::Instant;

use super::{Channel, Next};
use crate::channel::frame::{Entry, EntryKind, Frame};

/// Bytes of a file per data frame the host sends.
const CHUNK: usize = 32 * 1024;
/// How long the agent may take to answer the host's puts.
const PUT_LIMIT: Duration = Duration::from_secs(60);

/// Where a scan's entries go, in the order the agent sent them: each entry,
/// then (a file's) its bytes in pieces.
pub(crate) trait Sink: Send {
    fn entry(&mut self, entry: &Entry) -> Result<(), String>;
    fn data(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// The most one scan may bring.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) entries: u32,
    pub(crate) bytes: u64,
    pub(crate) time: Duration,
}

/// What one scan brought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Scanned {
    pub(crate) entries: u32,
    /// Bytes of files.
    pub(crate) bytes: u64,
}

impl Channel {
    /// Asks the agent what changed in `/work` and hands it to `sink`.
    /// Any error leaves the channel in an unknown state: drop it.
    pub(crate) async fn scan(
        &mut self,
        sink: &mut dyn Sink,
        bounds: Bounds,
    ) -> Result<Scanned, String> {
        self.send(&Frame::Scan).await?;
        let deadline = Instant::now() + bounds.time;
        let mut scanned = Scanned::default();
        // Bytes still owed to the last file entry.
        let mut owed = 0u64;
        loop {
            let frame = match self.next(deadline).await {
                Next::Frame(frame) => frame,
                Next::Timeout => {
                    return Err(format!(
                        "the sandbox did not report its changes within {} s",
                        bounds.time.as_secs()
                    ));
                }
                Next::Broken(why) => return Err(format!("the sandbox's agent broke off: {why}")),
            };
            match frame {
                Frame::Entry(entry) if owed == 0 => {
                    scanned.entries += 1;
                    if scanned.entries > bounds.entries {
                        return Err(format!("a step changed more than {} paths", bounds.entries));
                    }
                    if entry.kind == EntryKind::File {
                        owed = entry.size;
                        scanned.bytes = scanned.bytes.saturating_add(entry.size);
                        if scanned.bytes > bounds.bytes {
                            return Err(format!(
                                "a step changed more than {} MiB of files",
                                bounds.bytes / (1024 * 1024)
                            ));
                        }
                    }
                    sink.entry(&entry)?;
                }
                Frame::Data(bytes) if bytes.len() as u64 <= owed && !bytes.is_empty() => {
                    owed -= bytes.len() as u64;
                    sink.data(&bytes)?;
                }
                Frame::Done {
                    entries,
                    error: None,
                } if owed == 0 => {
                    if entries != scanned.entries {
                        return Err(format!(
                            "the sandbox's agent counted {entries} changes and sent {}",
                            scanned.entries
                        ));
                    }
                    return Ok(scanned);
                }
                Frame::Done {
                    error: Some(why), ..
                } => return Err(format!("the sandbox could not report its changes: {why}")),
                other => {
                    return Err(format!(
                        "the sandbox's agent sent {} out of turn",
                        frame_name(&other)
                    ));
                }
            }
        }
    }

    /// Writes the host's changes in the sandbox: each entry with a file's
    /// bytes; the agent's error, if it could not write one.
    pub(crate) async fn put(&mut self, puts: &[(Entry, Vec<u8>)]) -> Result<(), String> {
        for (entry, bytes) in puts {
            self.send(&Frame::Put(entry.clone())).await?;
            for chunk in bytes.chunks(CHUNK) {
                self.send(&Frame::Data(chunk.to_vec())).await?;
            }
        }
        self.send(&Frame::Synced).await?;
        match self.next(Instant::now() + PUT_LIMIT).await {
            Next::Frame(Frame::Done { error: None, .. }) => Ok(()),
            Next::Frame(Frame::Done {
                error: Some(why), ..
            }) => Err(format!(
                "the sandbox could not take the host's change: {why}"
            )),
            Next::Frame(other) => Err(format!(
                "the sandbox's agent sent {} out of turn",
                frame_name(&other)
            )),
            Next::Timeout => Err("the sandbox did not take the host's changes in time".into()),
            Next::Broken(why) => Err(format!("the sandbox's agent broke off: {why}")),
        }
    }
}

/// A frame's kind in words, for an error.
fn frame_name(frame: &Frame) -> &'static str {
    match frame {
        Frame::Entry(_) => "an entry",
        Frame::Data(_) => "file bytes",
        Frame::Done { .. } => "an end",
        Frame::Ready { .. } => "a ready",
        Frame::Stdout(_) | Frame::Stderr(_) => "output",
        Frame::Exit(_) => "an exit",
        _ => "a request",
    }
}
