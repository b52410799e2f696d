use serde_json::json;

use super::*;
use ah_llm::{ImageSource, Role};
use ah_session::MessageMeta;

/// An image block of step `step` whose base64 is `len` copies of `fill`.
fn picture(step: u64, fill: char, len: usize) -> BlockRecord {
    BlockRecord {
        details: Some(json!({"path": format!("/work/p{step}.png"), "step": step})),
        ..BlockRecord::from(Block::Image {
            source: ImageSource {
                kind: "base64".into(),
                media_type: "image/png".into(),
                data: fill.to_string().repeat(len),
            },
        })
    }
}

/// A session whose messages are `turns`, one user message each, and the
/// path to its last one.
fn stored(turns: Vec<Vec<BlockRecord>>) -> (tempfile::TempDir, Session, Vec<StoredMessage>) {
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::create(dir.path()).unwrap();
    let mut parent: Option<String> = None;
    for blocks in turns {
        let meta = MessageMeta::default();
        let message = session
            .append(parent.as_deref(), Role::User, &blocks, &meta)
            .unwrap();
        parent = Some(message.id);
    }
    let path = session.path_to(parent.as_deref().unwrap()).unwrap();
    (dir, session, path)
}

/// What each block of `messages` became: `P<fill>` for a picture sent
/// (its base64 one character repeated), its text otherwise.
fn shown(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|block| match block {
            Block::Image { source } => format!("P{}", &source.data[..1]),
            Block::Text { text } => text.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_most_recent_pictures_are_sent_and_the_older_ones_named() {
    let turns: Vec<Vec<BlockRecord>> = (0..25)
        .map(|i| vec![picture(i, char::from(b'A' + i as u8), 10)])
        .collect();
    let (_dir, session, path) = stored(turns);
    let view: Vec<&StoredMessage> = path.iter().collect();
    let shown = shown(&messages(&session, &view, true).unwrap());
    for (i, block) in shown.iter().enumerate() {
        if i < 5 {
            assert!(
                block.starts_with(&format!("[ah: the picture of step {i} (/work/p{i}.png) was left out here: a request carries only the 20 most recent pictures, 20 MB"))
                    && block.ends_with("Read it again if you need to see it.]"),
                "{block}"
            );
        } else {
            assert_eq!(block, &format!("P{}", char::from(b'A' + i as u8)));
        }
    }
}

#[test]
fn past_the_bytes_no_older_picture_is_sent_even_a_small_one() {
    let big = REQUEST_BYTES as usize / 3 + 1;
    let (_dir, session, path) = stored(vec![
        vec![picture(1, 'a', 10)],
        vec![picture(2, 'b', big), picture(3, 'c', big)],
        vec![picture(4, 'd', big)],
    ]);
    let view: Vec<&StoredMessage> = path.iter().collect();
    let shown = shown(&messages(&session, &view, true).unwrap());
    assert!(
        shown[0].contains("step 1 (/work/p1.png) was left out"),
        "{shown:?}"
    );
    assert!(
        shown[1].contains("step 2 (/work/p2.png) was left out"),
        "{shown:?}"
    );
    assert_eq!(shown[2..], ["Pc", "Pd"]);
}

#[test]
fn a_model_without_images_gets_a_note_for_each() {
    let (_dir, session, path) = stored(vec![vec![picture(1, 'a', 10), picture(2, 'b', 10)]]);
    let view: Vec<&StoredMessage> = path.iter().collect();
    let shown = shown(&messages(&session, &view, false).unwrap());
    assert_eq!(shown, [NO_IMAGES, NO_IMAGES]);
}

#[test]
fn a_turn_keeps_its_newest_pictures_within_the_bound() {
    let big = REQUEST_BYTES as usize / 2;
    let mut turn = TurnPictures::default();
    for (step, fill) in [(1, 'a'), (2, 'b'), (3, 'c')] {
        turn.push(picture(step, fill, big));
    }
    let blocks = turn.into_blocks();
    let Block::Text { text } = &blocks[0].block else {
        panic!("{:?}", blocks[0]);
    };
    assert!(
        text.contains("step 1 (/work/p1.png) was left out"),
        "{text}"
    );
    let kept: Vec<bool> = blocks
        .iter()
        .map(|b| matches!(b.block, Block::Image { .. }))
        .collect();
    assert_eq!(kept, [false, true, true]);
    let mut turn = TurnPictures::default();
    for step in 0..(PER_REQUEST as u64 + 2) {
        turn.push(picture(step, 'x', 1));
    }
    let notes = turn
        .into_blocks()
        .iter()
        .take_while(|b| matches!(b.block, Block::Text { .. }))
        .count();
    assert_eq!(notes, 2);
}
