//! "Choose files" in an `ask` review: a multi-select of the patch's files
//! with their +/− counts, each file that acts outside the diff marked ("runs
//! code in other tools", "instructions for agents", …). Every file starts
//! chosen.

use ah_core::run::{Choice, FileToChoose, PatchToChoose, Question};

/// Asks which files to apply.
pub(super) fn pick(patch: &PatchToChoose<'_>) -> Choice {
    let items: Vec<String> = patch.files.iter().map(item).collect();
    let defaults = vec![true; items.len()];
    let picked = dialoguer::MultiSelect::new()
        .with_prompt("Files to apply (space toggles, enter confirms)")
        .items(&items)
        .defaults(&defaults)
        .interact_opt();
    match picked {
        Ok(Some(chosen)) => Choice::Files(chosen),
        // Esc, Ctrl+C or a closed terminal keeps the whole patch.
        Ok(None) | Err(_) => Choice::Left(Question::WhichFiles),
    }
}

/// A file's line in the list: name, counts, mark.
fn item(file: &FileToChoose) -> String {
    let counts = match file.lines {
        Some((added, removed)) => format!("+{added} −{removed}"),
        None => "binary".to_string(),
    };
    let mark = file
        .acts_elsewhere
        .map(|label| format!("  ({label})"))
        .unwrap_or_default();
    format!("{}  {counts}{mark}", file.name)
}
