//! Pictures in requests. A request carries the conversation's most recent
//! pictures, at most [`PER_REQUEST`] of them and [`REQUEST_BYTES`] of their
//! base64 (the numbers and their reasons are `read`'s, with its other
//! image limits); every older one is replaced where it was by a note
//! naming it and saying it can be read again ([`left_out`]). Once one does
//! not fit, every older one is left out too, so what is sent is always the
//! newest.
//!
//! The path a request is built from comes without the pictures' base64
//! (`Session::path_to`); only those sent are loaded, so ah never holds
//! more of them at once than one request carries, whatever the session
//! stores. A turn's own pictures are bounded the same way before they are
//! stored ([`TurnPictures`]): one left out then would be left out of every
//! later request anyway, since newer pictures only add up.

use serde_json::Value;

use ah_llm::{Block, Message};
use ah_session::{BlockRecord, Session, SessionError, StoredMessage};
use ah_tools::read::image::{PER_REQUEST, REQUEST_BYTES};

/// What ah tells a model that takes no images where an image was.
pub(in crate::agent) const NO_IMAGES: &str = "[ah: an image was read here, but this model takes \
no images; it was not sent. Use the file another way (its name, bash tools such as `file` or \
`identify`), or ask the user.]";

/// What is left of the bound while pictures are taken newest first.
#[derive(Default)]
struct Budget {
    pictures: usize,
    bytes: u64,
    /// A picture did not fit: no older one is taken.
    full: bool,
}

impl Budget {
    /// The most bytes of base64 the next picture may have; `None` once
    /// nothing more is taken.
    fn room(&self) -> Option<u64> {
        (!self.full && self.pictures < PER_REQUEST).then(|| REQUEST_BYTES - self.bytes)
    }

    /// Takes a picture of `len` bytes of base64 if it fits, and says so.
    fn take(&mut self, len: u64) -> bool {
        let fits = self.room().is_some_and(|room| len <= room);
        if fits {
            self.pictures += 1;
            self.bytes += len;
        } else {
            self.full = true;
        }
        fits
    }
}

/// The view's messages as a request carries them. For a model that takes
/// images (`images`), the most recent pictures within the bound, their
/// base64 loaded from `session`, and a note for each older one; for a
/// model that takes none, [`NO_IMAGES`] for each, nothing loaded.
pub(in crate::agent) fn messages(
    session: &Session,
    view: &[&StoredMessage],
    images: bool,
) -> Result<Vec<Message>, SessionError> {
    let mut budget = Budget::default();
    let mut out: Vec<Message> = view.iter().map(|message| message.to_message()).collect();
    for (stored, message) in view.iter().zip(&mut out).rev() {
        let blocks = stored.blocks.iter().zip(&mut message.content).enumerate();
        for (index, (record, block)) in blocks.rev() {
            let Block::Image { source } = block else {
                continue;
            };
            let data = match budget.room() {
                Some(room) if images => session.image_data(&stored.id, index, room)?,
                _ => None,
            };
            match data {
                Some(data) if budget.take(data.len() as u64) => source.data = data,
                _ if !images => *block = text(NO_IMAGES.to_string()),
                _ => {
                    budget.full = true;
                    *block = text(left_out(record.details.as_ref()));
                }
            }
        }
    }
    Ok(out)
}

/// A turn's pictures, bounded as a request is while its steps bring them:
/// when a new one goes past the bound, the oldest are left out, each
/// replaced by its note, so a turn holds no more than one request carries.
#[derive(Default)]
pub(in crate::agent) struct TurnPictures {
    blocks: Vec<BlockRecord>,
}

impl TurnPictures {
    /// Adds `picture` (an image block), the newest.
    pub(crate) fn push(&mut self, picture: BlockRecord) {
        self.blocks.push(picture);
        let mut budget = Budget::default();
        for record in self.blocks.iter_mut().rev() {
            let Block::Image { source } = &record.block else {
                continue;
            };
            if !budget.take(source.data.len() as u64) {
                *record = BlockRecord::from(text(left_out(record.details.as_ref())));
            }
        }
    }

    /// The pictures kept and the notes, oldest first.
    pub(crate) fn into_blocks(self) -> Vec<BlockRecord> {
        self.blocks
    }
}

fn text(text: String) -> Block {
    Block::Text { text }
}

/// The note that stands where a picture was left out, naming it by the
/// step and file its image block's `details` give.
fn left_out(details: Option<&Value>) -> String {
    let step = details.and_then(|d| d["step"].as_u64());
    let path = details.and_then(|d| d["path"].as_str());
    let mut name = "the picture".to_string();
    if let Some(step) = step {
        name.push_str(&format!(" of step {step}"));
    }
    if let Some(path) = path {
        name.push_str(&format!(" ({path})"));
    }
    format!(
        "[ah: {name} was left out here: a request carries only the {PER_REQUEST} most recent \
         pictures, {} MB of them at most. Read it again if you need to see it.]",
        REQUEST_BYTES / 1_000_000
    )
}

#[cfg(test)]
mod tests;
