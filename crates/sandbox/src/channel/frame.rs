//! The command channel's wire format: frames on a byte stream, so the same
//! channel can run over a `podman exec -i` pipe, `podman --remote` or any
//! other exec stream.
//!
//! A frame is a type byte, a payload length (`u32`, big-endian) and the
//! payload. Whoever reads gives the largest payload it accepts: the host
//! reads the sandbox's frames with [`MAX_FRAME`], the agent reads the
//! host's with [`MAX_REQUEST`]. A frame that is too large, of an unknown
//! type, cut short or malformed is an error, never a panic; the length is
//! checked before a byte of the payload is read, so a reader never holds
//! more than one bounded frame.

use std::io::{self, Read};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The protocol version the agent announces in [`Frame::Ready`] (2: the
/// changes of `/work` travel too, for a sandbox on another machine; 3: the
/// init that started the agent says when it ended, [`Frame::Gone`]; 4: an
/// exit says what the sandbox's memory cgroup saw, [`Exit::memory`]).
pub const VERSION: u32 = 4;
/// The largest payload the host accepts from the sandbox.
pub const MAX_FRAME: usize = 64 * 1024;
/// The largest payload the agent accepts from the host: a command line
/// (Linux caps one argument, and so `bash -c`'s, at 128 KiB).
pub const MAX_REQUEST: usize = 256 * 1024;
/// Bytes of a type and a length before each payload.
pub const HEADER: usize = 5;

const RUN: u8 = 0x01;
const KILL: u8 = 0x02;
const PING: u8 = 0x03;
const SCAN: u8 = 0x04;
const PUT: u8 = 0x05;
const DATA: u8 = 0x06;
const SYNCED: u8 = 0x07;
const READY: u8 = 0x10;
const STDOUT: u8 = 0x11;
const STDERR: u8 = 0x12;
const EXIT: u8 = 0x13;
const ENTRY: u8 = 0x14;
const DONE: u8 = 0x15;
const GONE: u8 = 0x16;

/// One message on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Host → agent: run this command line with `bash -c` in `/work`.
    Run(Vec<u8>),
    /// Host → agent: end the running command: TERM everything, and KILL
    /// what is left after `grace_ms`.
    Kill { grace_ms: u32 },
    /// Host → agent, between commands: are you there? The agent answers
    /// [`Frame::Ready`].
    Ping,
    /// Agent → host, at the start and for each ping: the agent is up,
    /// idle, and speaks `version`.
    Ready { version: u32 },
    /// Agent → host: bytes the command wrote to its stdout.
    Stdout(Vec<u8>),
    /// Agent → host: bytes the command wrote to its stderr.
    Stderr(Vec<u8>),
    /// Agent → host: the command ended and so did everything it started.
    Exit(Exit),
    /// Host → agent, between commands: report what changed in `/work`
    /// since the agent's last report (or its start, or the host's last
    /// [`Frame::Synced`]): [`Frame::Entry`] frames, then [`Frame::Done`].
    Scan,
    /// Host → agent: make this path of `/work` what the entry says (a
    /// file's bytes follow in [`Frame::Data`] frames).
    Put(Entry),
    /// Either way: the next bytes of the file the last entry announced.
    Data(Vec<u8>),
    /// Host → agent: the puts are over; the agent answers [`Frame::Done`].
    Synced,
    /// Agent → host: one path that changed (a file's bytes follow in
    /// [`Frame::Data`] frames).
    Entry(Entry),
    /// Agent → host: the end of a scan or of the puts: how many entries, or
    /// why it could not do them.
    Done { entries: u32, error: Option<String> },
    /// Init → host, last on the channel: the agent the init started on
    /// it ended, with this status (`clean` is false); nothing more comes.
    Gone(Exit),
}

/// One path of `/work` as the changes carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to `/work`, as the file system has it (any bytes).
    pub path: Vec<u8>,
    pub kind: EntryKind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    /// A file's length in bytes: exactly this many follow as data.
    pub size: u64,
    /// A symbolic link's target.
    pub target: Vec<u8>,
}

/// What a path is (or that it is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Nothing is there any more (a folder: nor anything in it).
    Gone,
    File,
    Dir,
    Link,
    /// A FIFO, socket or device: told, never copied.
    Special,
}

/// Bytes of an entry's payload before its path.
const ENTRY_HEADER: usize = 1 + 4 + 8 + 4;

impl Entry {
    fn encode(&self) -> Vec<u8> {
        let kind = match self.kind {
            EntryKind::Gone => 0u8,
            EntryKind::File => 1,
            EntryKind::Dir => 2,
            EntryKind::Link => 3,
            EntryKind::Special => 4,
        };
        let path_len = u32::try_from(self.path.len()).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(ENTRY_HEADER + self.path.len() + self.target.len());
        out.push(kind);
        out.extend_from_slice(&self.mode.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&path_len.to_be_bytes());
        out.extend_from_slice(&self.path);
        out.extend_from_slice(&self.target);
        out
    }

    fn decode(payload: &[u8]) -> Result<Entry, FrameError> {
        let malformed = FrameError::Malformed("entry");
        if payload.len() < ENTRY_HEADER {
            return Err(malformed);
        }
        let kind = match payload[0] {
            0 => EntryKind::Gone,
            1 => EntryKind::File,
            2 => EntryKind::Dir,
            3 => EntryKind::Link,
            4 => EntryKind::Special,
            _ => return Err(malformed),
        };
        let word = |at: usize| {
            u32::from_be_bytes([
                payload[at],
                payload[at + 1],
                payload[at + 2],
                payload[at + 3],
            ])
        };
        let mode = word(1);
        let mut size = [0u8; 8];
        size.copy_from_slice(&payload[5..13]);
        let path_len = word(13) as usize;
        let rest = &payload[ENTRY_HEADER..];
        if path_len > rest.len() {
            return Err(malformed);
        }
        let (path, target) = rest.split_at(path_len);
        Ok(Entry {
            path: path.to_vec(),
            kind,
            mode,
            size: u64::from_be_bytes(size),
            target: target.to_vec(),
        })
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub status: Status,
    /// Whether the cleanup after it found every other process dead (false:
    /// something survived `SIGKILL`, and the host must clean up from
    /// outside).
    pub clean: bool,
    /// The sandbox's memory cgroup as the agent sees it, where it can read
    /// one: for a host that cannot look into the engine's cgroups.
    pub memory: Option<MemorySeen>,
}

/// What the agent read of the memory cgroup it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySeen {
    /// The cgroup's limit in bytes (`u64::MAX`: none).
    pub limit: u64,
    /// How many processes the OOM killer ended in it while the command
    /// ran.
    pub oom_kills: u64,
}

/// The end of the command's `bash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
}

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the channel closed")]
    Closed,
    #[error("the channel closed in the middle of a frame")]
    Truncated,
    #[error("a frame of {len} bytes is over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("a frame of unknown type {0:#04x}")]
    UnknownType(u8),
    #[error("a malformed {0} frame")]
    Malformed(&'static str),
    #[error("reading the channel failed: {0}")]
    Io(#[from] io::Error),
}

impl Frame {
    /// The frame as bytes to write in one go.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload): (u8, std::borrow::Cow<[u8]>) = match self {
            Frame::Run(command) => (RUN, command.into()),
            Frame::Kill { grace_ms } => (KILL, grace_ms.to_be_bytes().to_vec().into()),
            Frame::Ping => (PING, Vec::new().into()),
            Frame::Ready { version } => (READY, version.to_be_bytes().to_vec().into()),
            Frame::Stdout(bytes) => (STDOUT, bytes.into()),
            Frame::Stderr(bytes) => (STDERR, bytes.into()),
            Frame::Exit(exit) => (EXIT, exit.encode().into()),
            Frame::Gone(exit) => (GONE, exit.encode().into()),
            Frame::Scan => (SCAN, Vec::new().into()),
            Frame::Put(entry) => (PUT, entry.encode().into()),
            Frame::Data(bytes) => (DATA, bytes.into()),
            Frame::Synced => (SYNCED, Vec::new().into()),
            Frame::Entry(entry) => (ENTRY, entry.encode().into()),
            Frame::Done { entries, error } => {
                let mut payload = entries.to_be_bytes().to_vec();
                if let Some(error) = error {
                    payload.extend_from_slice(error.as_bytes());
                }
                (DONE, payload.into())
            }
        };
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.push(kind);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }
}

impl Exit {
    /// The status, then whether clean, then the memory seen (16 bytes) or
    /// nothing.
    fn encode(&self) -> Vec<u8> {
        let (kind, value) = match self.status {
            Status::Code(code) => (0, code),
            Status::Signal(signal) => (1, signal),
        };
        let mut out = vec![kind];
        out.extend_from_slice(&value.to_be_bytes());
        out.push(u8::from(self.clean));
        if let Some(memory) = self.memory {
            out.extend_from_slice(&memory.limit.to_be_bytes());
            out.extend_from_slice(&memory.oom_kills.to_be_bytes());
        }
        out
    }

    fn decode(payload: &[u8]) -> Result<Exit, FrameError> {
        let malformed = FrameError::Malformed("exit");
        let (head, memory) = match payload.len() {
            6 => (payload, None),
            22 => {
                let (head, tail) = payload.split_at(6);
                let (limit, kills) = tail.split_at(8);
                let number = |bytes: &[u8]| {
                    <[u8; 8]>::try_from(bytes)
                        .map(u64::from_be_bytes)
                        .map_err(|_| FrameError::Malformed("exit"))
                };
                let seen = MemorySeen {
                    limit: number(limit)?,
                    oom_kills: number(kills)?,
                };
                (head, Some(seen))
            }
            _ => return Err(malformed),
        };
        let [kind, a, b, c, d, clean] = head else {
            return Err(malformed);
        };
        let value = i32::from_be_bytes([*a, *b, *c, *d]);
        let status = match kind {
            0 => Status::Code(value),
            1 => Status::Signal(value),
            _ => return Err(malformed),
        };
        let clean = match clean {
            0 => false,
            1 => true,
            _ => return Err(malformed),
        };
        Ok(Exit {
            status,
            clean,
            memory,
        })
    }
}

/// The type and payload length of a header, checked against `max`.
fn check_header(header: [u8; HEADER], max: usize) -> Result<(u8, usize), FrameError> {
    let kind = header[0];
    if !matches!(
        kind,
        RUN | KILL
            | PING
            | SCAN
            | PUT
            | DATA
            | SYNCED
            | READY
            | STDOUT
            | STDERR
            | EXIT
            | ENTRY
            | DONE
            | GONE
    ) {
        return Err(FrameError::UnknownType(kind));
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok((kind, len))
}

fn decode(kind: u8, payload: Vec<u8>) -> Result<Frame, FrameError> {
    let word = |what| -> Result<u32, FrameError> {
        let bytes: [u8; 4] = payload
            .as_slice()
            .try_into()
            .map_err(|_| FrameError::Malformed(what))?;
        Ok(u32::from_be_bytes(bytes))
    };
    Ok(match kind {
        RUN => Frame::Run(payload),
        KILL => Frame::Kill {
            grace_ms: word("kill")?,
        },
        PING if payload.is_empty() => Frame::Ping,
        PING => return Err(FrameError::Malformed("ping")),
        READY => Frame::Ready {
            version: word("ready")?,
        },
        STDOUT => Frame::Stdout(payload),
        STDERR => Frame::Stderr(payload),
        EXIT => Frame::Exit(Exit::decode(&payload)?),
        GONE => Frame::Gone(Exit::decode(&payload)?),
        SCAN if payload.is_empty() => Frame::Scan,
        SCAN => return Err(FrameError::Malformed("scan")),
        PUT => Frame::Put(Entry::decode(&payload)?),
        DATA => Frame::Data(payload),
        SYNCED if payload.is_empty() => Frame::Synced,
        SYNCED => return Err(FrameError::Malformed("synced")),
        ENTRY => Frame::Entry(Entry::decode(&payload)?),
        DONE => {
            let Some((count, error)) = payload.split_first_chunk::<4>() else {
                return Err(FrameError::Malformed("done"));
            };
            Frame::Done {
                entries: u32::from_be_bytes(*count),
                error: (!error.is_empty()).then(|| String::from_utf8_lossy(error).into_owned()),
            }
        }
        other => return Err(FrameError::UnknownType(other)),
    })
}

/// Reads one frame of at most `max` payload bytes from a blocking stream.
pub fn read_frame(input: &mut impl Read, max: usize) -> Result<Frame, FrameError> {
    let mut header = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match input.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err.into()),
        }
    }
    let (kind, len) = check_header(header, max)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).map_err(truncated)?;
    decode(kind, payload)
}

/// [`read_frame`] on an async stream. Not cancel-safe: read from one task
/// that owns the stream.
pub async fn read_frame_async(
    input: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> Result<Frame, FrameError> {
    let mut header = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match input.read(&mut header[got..]).await? {
            0 if got == 0 => return Err(FrameError::Closed),
            0 => return Err(FrameError::Truncated),
            n => got += n,
        }
    }
    let (kind, len) = check_header(header, max)?;
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await.map_err(truncated)?;
    decode(kind, payload)
}

fn truncated(err: io::Error) -> FrameError {
    if err.kind() == io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(err)
    }
}

#[cfg(test)]
mod tests;
