//! Many pictures in one conversation (issue 28, class 8), through the real
//! binary and both wire formats: 48 `read`s of a 3.6 MB PNG in one turn,
//! then more turns. The host `ah` stays under the memory bound, every
//! later request carries only the most recent pictures within the bound a
//! request has, and each picture left out is named in a note.

use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::memory_bounds::{assert_small, run_measuring_peak};
use crate::support::host::Host;
use crate::support::mock::{MockServer, RecordedRequest, Reply, Turn};

/// Pictures read in one turn.
const PICTURES: usize = 48;
/// The size of each, within the 3 750 KB `read` sends.
const PICTURE_BYTES: usize = 3_600_000;
/// The most pictures a request carries, and of their base64…
const MAX_PICTURES: usize = 20;
/// …at most this many bytes.
const MAX_PICTURE_BYTES: usize = 20_000_000;
/// The largest request the Anthropic API takes.
const MAX_REQUEST_BYTES: usize = 32_000_000;
/// How many of the pictures fit in a request (4.8 MB of base64 each).
const KEPT: usize = 4;

/// A PNG of `PICTURE_BYTES` with a valid header (2×1 pixels) and noise
/// for data, so that it does not compress.
fn picture() -> Vec<u8> {
    const HEAD: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b,
        0x40, 0xe8, 0xdd,
    ];
    const IEND: &[u8] = &[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82];
    // Each file gets a 5-byte tag after its end (see `make_pictures`).
    let data = PICTURE_BYTES - HEAD.len() - 12 - IEND.len() - 5;
    let mut png = HEAD.to_vec();
    png.extend((data as u32).to_be_bytes());
    png.extend(b"IDAT");
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    png.extend((0..data).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    }));
    png.extend([0; 4]);
    png.extend(IEND);
    png
}

/// The bash command that makes `scratch/p01.png` … `p48.png`: the picture
/// with `tagNN` after its end, so each one is known in a request.
fn make_pictures() -> String {
    format!(
        "mkdir scratch && for i in $(seq -w 1 {PICTURES}); do \
         {{ cat pic.png; printf tag$i; }} > scratch/p$i.png; done"
    )
}

fn name(i: usize) -> String {
    format!("scratch/p{i:02}.png")
}

/// The turns: make the pictures, read them all in one turn, run a
/// command, read the first one again, done.
fn script() -> Vec<Turn> {
    let mut reads = Reply::new();
    for i in 1..=PICTURES {
        reads = reads.tool_use(format!("read_{i}"), "read", json!({"path": name(i)}));
    }
    vec![
        Turn::reply(Reply::new().tool_use("make", "bash", json!({"command": make_pictures()}))),
        Turn::reply(reads),
        Turn::reply(Reply::new().tool_use("more", "bash", json!({"command": "true"}))),
        Turn::reply(Reply::new().tool_use("again", "read", json!({"path": name(1)}))),
        Turn::reply(Reply::new().text("done")),
    ]
}

/// What a request carries: its pictures' base64 in order (an Anthropic
/// image block or an OpenAI `image_url` part) and all its text.
fn contents(value: &Value, pictures: &mut Vec<String>, text: &mut String) {
    match value {
        Value::Object(map) if map.get("type") == Some(&json!("image")) => {
            pictures.push(map["source"]["data"].as_str().unwrap().to_string());
        }
        Value::Object(map) if map.get("type") == Some(&json!("image_url")) => {
            let url = map["image_url"]["url"].as_str().unwrap();
            let data = url.strip_prefix("data:image/png;base64,").unwrap();
            pictures.push(data.to_string());
        }
        Value::Object(map) => map.values().for_each(|v| contents(v, pictures, text)),
        Value::Array(items) => items.iter().for_each(|v| contents(v, pictures, text)),
        Value::String(s) => {
            text.push_str(s);
            text.push('\n');
        }
        _ => {}
    }
}

/// The tag of a picture sent (`NN` of `pNN.png`).
fn tag(base64: &str) -> usize {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap();
    let tag = std::str::from_utf8(&bytes[bytes.len() - 5..]).unwrap();
    tag.strip_prefix("tag").unwrap().parse().unwrap()
}

/// Checks one request after the reads: within the bounds, `sent` are the
/// pictures it carries (by tag, in order), and every file in `left_out`
/// is named in a note.
fn check(request: &RecordedRequest, sent: &[usize], left_out: &[usize]) {
    let size = serde_json::to_vec(&request.body).unwrap().len();
    assert!(size <= MAX_REQUEST_BYTES, "a request of {size} bytes");
    let (mut pictures, mut text) = (Vec::new(), String::new());
    contents(&request.body, &mut pictures, &mut text);
    let bytes: usize = pictures.iter().map(String::len).sum();
    assert!(
        pictures.len() <= MAX_PICTURES && bytes <= MAX_PICTURE_BYTES,
        "{} pictures, {bytes} bytes of base64",
        pictures.len()
    );
    let tags: Vec<usize> = pictures.iter().map(|p| tag(p)).collect();
    assert_eq!(tags, sent, "the most recent pictures are sent");
    for &i in left_out {
        let note = format!("(/work/{}) was left out", name(i));
        assert!(text.contains(&note), "no note names {}", name(i));
    }
    let notes = text.matches(") was left out").count();
    assert_eq!(notes, left_out.len(), "one note per picture left out");
}

/// Runs the script with `command` (ah for one API), measuring its peak
/// resident size, and checks what the model was sent.
fn many_pictures(mock: &MockServer, mut command: Command) {
    command.args(["--backend", "none", "--review", "never", "look at them all"]);
    let (peak, code, stderr) = run_measuring_peak(command);
    assert_small(peak);
    assert_eq!(code, Some(0), "{stderr}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let newest: Vec<usize> = (PICTURES + 1 - KEPT..=PICTURES).collect();
    let older: Vec<usize> = (1..=PICTURES - KEPT).collect();
    check(&requests[2], &newest, &older);
    check(&requests[3], &newest, &older);
    // Read again, the first picture is the newest; one more is left out.
    let mut sent: Vec<usize> = (PICTURES + 2 - KEPT..=PICTURES).collect();
    sent.push(1);
    let older: Vec<usize> = (1..=PICTURES + 1 - KEPT).collect();
    check(&requests[4], &sent, &older);
}

fn project() -> Host {
    let host = Host::git(&[(".gitignore", "scratch/\n")]);
    std::fs::write(host.project.join("pic.png"), picture()).unwrap();
    host.commit_all("a picture");
    host
}

#[test]
fn many_pictures_in_one_turn_stay_within_memory_and_the_request_bound() {
    let host = project();
    let mock = MockServer::start(script());
    let command = host.ah(&mock.url());
    many_pictures(&mock, command);
}

#[test]
fn many_pictures_for_openai_stay_within_memory_and_the_request_bound() {
    let host = project();
    let mock = MockServer::start(script());
    let mut command = host.ah_openai(&mock.openai_url());
    command.args(["-m", "openai:gpt-4.1"]);
    many_pictures(&mock, command);
}
