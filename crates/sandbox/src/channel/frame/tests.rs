use super::*;

fn every_frame() -> Vec<Frame> {
    vec![
        Frame::Run(b"echo 'hi'; exit 3".to_vec()),
        Frame::Run(Vec::new()),
        Frame::Kill { grace_ms: 2000 },
        Frame::Ping,
        Frame::Ready { version: VERSION },
        Frame::Stdout(vec![0, 255, b'\n']),
        Frame::Stderr(b"oops\n".to_vec()),
        Frame::Exit(Exit {
            status: Status::Code(-1),
            clean: true,
            memory: None,
        }),
        Frame::Exit(Exit {
            status: Status::Signal(9),
            clean: false,
            memory: Some(MemorySeen {
                limit: 256 << 20,
                oom_kills: 2,
            }),
        }),
        Frame::Exit(Exit {
            status: Status::Code(0),
            clean: true,
            memory: Some(MemorySeen {
                limit: u64::MAX,
                oom_kills: 0,
            }),
        }),
        Frame::Gone(Exit {
            status: Status::Signal(9),
            clean: false,
            memory: None,
        }),
    ]
}

fn read_all(bytes: &[u8], max: usize) -> Vec<Result<Frame, FrameError>> {
    let mut input = bytes;
    let mut frames = Vec::new();
    loop {
        match read_frame(&mut input, max) {
            Err(FrameError::Closed) => return frames,
            Err(err) => {
                frames.push(Err(err));
                return frames;
            }
            Ok(frame) => frames.push(Ok(frame)),
        }
    }
}

#[test]
fn every_frame_survives_a_round_trip() {
    let frames = every_frame();
    let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
    let read: Vec<Frame> = read_all(&bytes, MAX_FRAME)
        .into_iter()
        .map(|f| f.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(read, frames);
}

#[tokio::test]
async fn the_async_reader_reads_the_same_frames() {
    let frames = every_frame();
    let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
    let mut input = bytes.as_slice();
    for frame in &frames {
        let read = read_frame_async(&mut input, MAX_FRAME).await;
        assert_eq!(read.ok().as_ref(), Some(frame));
    }
    assert!(matches!(
        read_frame_async(&mut input, MAX_FRAME).await,
        Err(FrameError::Closed)
    ));
}

#[test]
fn an_oversized_frame_is_refused_before_its_payload_is_read() {
    let big = Frame::Stdout(vec![b'x'; MAX_FRAME + 1]).encode();
    // Only the header is there: the reader must not wait for the rest.
    let got = read_all(&big[..HEADER], MAX_FRAME);
    assert!(
        matches!(got[..], [Err(FrameError::TooLarge { len, max })] if len == MAX_FRAME + 1 && max == MAX_FRAME),
        "{got:?}"
    );
    // A length near 4 GiB allocates nothing.
    let got = read_all(&[STDOUT, 0xff, 0xff, 0xff, 0xff], MAX_FRAME);
    assert!(matches!(got[..], [Err(FrameError::TooLarge { .. })]));
    // Exactly the limit is fine.
    let fits = Frame::Stdout(vec![b'x'; MAX_FRAME]).encode();
    assert!(matches!(read_all(&fits, MAX_FRAME)[..], [Ok(_)]));
}

#[test]
fn a_cut_frame_is_truncated_not_closed() {
    let bytes = Frame::Stderr(b"abcdef".to_vec()).encode();
    for cut in 1..bytes.len() {
        let got = read_all(&bytes[..cut], MAX_FRAME);
        assert!(
            matches!(got[..], [Err(FrameError::Truncated)]),
            "cut at {cut}: {got:?}"
        );
    }
    assert!(
        read_all(&[], MAX_FRAME).is_empty(),
        "an empty stream is closed"
    );
}

#[test]
fn unknown_types_and_bad_payloads_are_errors() {
    let got = read_all(&[0x7f, 0, 0, 0, 0], MAX_FRAME);
    assert!(matches!(got[..], [Err(FrameError::UnknownType(0x7f))]));
    let kill_short = [KILL, 0, 0, 0, 2, 1, 2];
    assert!(matches!(
        read_all(&kill_short, MAX_FRAME)[..],
        [Err(FrameError::Malformed("kill"))]
    ));
    assert!(matches!(
        read_all(&[PING, 0, 0, 0, 1, 0], MAX_FRAME)[..],
        [Err(FrameError::Malformed("ping"))]
    ));
    let exit_bad_kind = [EXIT, 0, 0, 0, 6, 7, 0, 0, 0, 0, 1];
    assert!(matches!(
        read_all(&exit_bad_kind, MAX_FRAME)[..],
        [Err(FrameError::Malformed("exit"))]
    ));
    let exit_bad_flag = [EXIT, 0, 0, 0, 6, 0, 0, 0, 0, 0, 2];
    assert!(matches!(
        read_all(&exit_bad_flag, MAX_FRAME)[..],
        [Err(FrameError::Malformed("exit"))]
    ));
    // The memory seen is all of its 16 bytes or none of them.
    let exit_half_memory = [EXIT, 0, 0, 0, 14, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
    assert!(matches!(
        read_all(&exit_half_memory, MAX_FRAME)[..],
        [Err(FrameError::Malformed("exit"))]
    ));
}

#[test]
fn garbage_never_panics_and_never_reads_past_its_end() {
    // A simple generator: every byte string the reader can be fed must end
    // in frames or an error, never a panic or a hang.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        let len = (seed % 40) as usize;
        let mut bytes = Vec::with_capacity(len);
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            bytes.push(seed as u8);
        }
        let frames = read_all(&bytes, 16);
        let consumed: usize = frames
            .iter()
            .filter_map(|f| f.as_ref().ok())
            .map(|f| f.encode().len())
            .sum();
        assert!(consumed <= bytes.len());
    }
}
