//! Pictures through `read`, with the real binary: a PNG reaches a Claude
//! model as an image block after the turn's tool results (and an OpenAI
//! model as an `image_url` part), stored once in the session and named by
//! `ah show`; a model that takes no images gets a note instead; an image
//! past the size limits is refused with its numbers.

use base64::Engine as _;

use crate::support::host::{Host, describe, query};
use crate::support::mock::MockServer;
use crate::support::org::{call, say};
use serde_json::{Value, json};

/// A 2×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8,
    0xdd, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0x00, 0x04,
    0xff, 0x01, 0x07, 0x00, 0x01, 0xff, 0xe2, 0x23, 0x9e, 0x59, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn project() -> Host {
    let host = Host::git(&[("README.md", "hello\n")]);
    std::fs::write(host.project.join("pic.png"), PNG).unwrap();
    // A header that says 9000×10 pixels.
    let mut wide = PNG.to_vec();
    wide[16..20].copy_from_slice(&9000u32.to_be_bytes());
    std::fs::write(host.project.join("wide.png"), wide).unwrap();
    host.commit_all("pictures");
    host
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn a_png_reaches_claude_as_an_image_block_after_the_results_stored_once() {
    let host = project();
    let mock = MockServer::start(vec![
        call("t1", "read", json!({"path": "pic.png"})),
        call("t2", "read", json!({"path": "wide.png"})),
        say("It is a tiny picture."),
    ]);
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "look at pic.png"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let requests = mock.requests();
    let content = requests[1].last_message()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(content[0]["type"], json!("tool_result"));
    assert!(
        content[0]["content"]
            .as_str()
            .unwrap()
            .contains("is an image (image/png, 2×1 pixels"),
        "{content:?}"
    );
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64(PNG)}})
    );
    // Past the limits: refused with its numbers, no image.
    let refused = requests[2].told();
    assert!(
        refused.contains("9000×1 pixels") && refused.contains("at most 8000"),
        "{refused}"
    );
    let last = requests[2].last_message()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        !last.iter().any(|b| b["type"] == json!("image")),
        "{last:?}"
    );
    // The first image is still sent with the conversation, as an image.
    let images: Vec<&Value> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == json!("image"))
        .collect();
    assert_eq!(images.len(), 1);

    // Stored once: one image block, and no copy in the tool result.
    let db = &host.sessions()[0];
    let stored = query(
        db,
        "SELECT COUNT(*), MAX(length(content)) FROM content_blocks WHERE block_type = 'image'",
    );
    assert_eq!(stored[0][0], json!(1));
    assert_eq!(stored[0][1], json!(base64(PNG).len()));
    let copies = query(
        db,
        "SELECT COUNT(*) FROM content_blocks WHERE instr(tool_output, 'IHDR') > 0",
    );
    assert_eq!(copies[0][0], json!(0));
    let bare = query(
        db,
        "SELECT COUNT(*) FROM content_blocks WHERE block_type = 'tool_result' AND tool_output IS NULL",
    );
    assert_eq!(bare[0][0], json!(1), "the picture's result keeps no copy");
    let seq = query(
        db,
        "SELECT m.seq FROM messages m JOIN content_blocks b ON b.message_id = m.id \
         WHERE b.block_type = 'image'",
    );
    let at = format!("@{}", seq[0][0]);
    let show = host.ah(&mock.url()).args(["show", &at]).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains("image image/png, about 1 KB, sent to the model"),
        "{shown}"
    );
    assert!(shown.contains("read from /work/pic.png"), "{shown}");
}

#[test]
fn openai_gets_an_image_url_part_and_a_model_without_images_a_note() {
    // `vision` is a local model its alias says takes images.
    let cases = [
        ("openai:gpt-4.1", true),
        ("ollama:coder", false),
        ("vision", true),
    ];
    for (model, images) in cases {
        let host = project();
        let config = host.home.join(".config/ah");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            "[models.vision]\nid = \"llava\"\nprovider = \"ollama\"\nimages = true\n",
        )
        .unwrap();
        let mock = MockServer::start(vec![
            call("t1", "read", json!({"path": "pic.png"})),
            say("done"),
        ]);
        let out = host
            .ah_openai(&mock.openai_url())
            .args([
                "--backend",
                "none",
                "--review",
                "never",
                "-m",
                model,
                "look",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{model}: {}", describe(&out));
        let messages = mock.requests()[1].messages().to_vec();
        let last = messages.last().unwrap();
        assert_eq!(last["role"], json!("user"), "{model}: {last}");
        let text = last.to_string();
        if images {
            let url = format!("data:image/png;base64,{}", base64(PNG));
            assert!(
                last["content"]
                    .as_array()
                    .is_some_and(|parts| parts.iter().any(|p| p["image_url"]["url"] == json!(url))),
                "{model}: {last}"
            );
        } else {
            assert!(
                text.contains("this model takes no images"),
                "{model}: {text}"
            );
            assert!(!text.contains("base64"), "{model}: {text}");
        }
    }
}
