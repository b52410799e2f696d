//! "Choose files" in an `ask` review: a multi-select of the patch's files,
//! names and counts in columns, each with a `+++--` bar scaled as the
//! diffstat's (git's `--stat`), and each file that acts outside the diff
//! marked ("runs code in other tools", "instructions for agents", …).
//! Every file starts chosen.

use console::style;

use ah_core::present::stat_bar;
use ah_core::run::{Choice, FileToChoose, PatchToChoose, Question};

/// Widest `+++--` bar in the list.
const BAR_WIDTH: u64 = 20;

/// Asks which files to apply.
pub(super) fn pick(patch: &PatchToChoose<'_>) -> Choice {
    let items = items(&patch.files);
    let defaults = vec![true; items.len()];
    let picked = super::menu::tick(
        "Files to apply (space toggles, enter confirms)",
        &items,
        &defaults,
    );
    match picked {
        Some(chosen) => Choice::Files(chosen),
        // Esc, Ctrl+C or a closed terminal keeps the whole patch.
        None => Choice::Left(Question::WhichFiles),
    }
}

/// Each file's line: name, counts, bar, mark; names and counts padded to
/// the widest of the list.
fn items(files: &[FileToChoose]) -> Vec<String> {
    let counts: Vec<String> = files
        .iter()
        .map(|file| match file.lines {
            Some((added, removed)) => format!("+{added} −{removed}"),
            None => "binary".to_string(),
        })
        .collect();
    let widest = |texts: &mut dyn Iterator<Item = &str>| {
        texts.map(|text| text.chars().count()).max().unwrap_or(0)
    };
    let name_width = widest(&mut files.iter().map(|file| file.name.as_str()));
    let count_width = widest(&mut counts.iter().map(String::as_str));
    let max_change = files
        .iter()
        .filter_map(|file| file.lines)
        .map(|(added, removed)| added + removed)
        .max()
        .unwrap_or(0);
    files
        .iter()
        .zip(&counts)
        .map(|(file, count)| {
            let bar = file
                .lines
                .map(|(added, removed)| {
                    let (plus, minus) = stat_bar(added, removed, BAR_WIDTH, max_change);
                    let plus = style("+".repeat(plus as usize)).for_stderr().green();
                    let minus = style("-".repeat(minus as usize)).for_stderr().red();
                    format!("  {plus}{minus}")
                })
                .unwrap_or_default();
            let mark = file
                .acts_elsewhere
                .map(|label| format!("  ({label})"))
                .unwrap_or_default();
            let name_pad = name_width - file.name.chars().count();
            let count_pad = count_width - count.chars().count();
            let line = format!(
                "{}{}  {count}{}{bar}{mark}",
                file.name,
                " ".repeat(name_pad),
                " ".repeat(count_pad)
            );
            line.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, lines: Option<(u64, u64)>) -> FileToChoose {
        FileToChoose {
            name: name.to_string(),
            lines,
            acts_elsewhere: None,
        }
    }

    #[test]
    fn each_file_has_a_bar_scaled_like_the_diffstat() {
        console::set_colors_enabled_stderr(false);
        let mut marked = file("AGENTS.md", Some((1, 0)));
        marked.acts_elsewhere = Some("instructions for agents");
        let files = [
            file("a.txt", Some((3, 2))),
            file("big/file.rs", Some((300, 100))),
            marked,
            file("logo.png", None),
        ];
        assert_eq!(
            items(&files),
            [
                "a.txt        +3 −2      +-",
                "big/file.rs  +300 −100  +++++++++++++++-----",
                "AGENTS.md    +1 −0      +  (instructions for agents)",
                "logo.png     binary",
            ]
        );
    }
}
