//! "Choose hunks" in an `ask` review: each unit of the patch in turn (a
//! hunk, or a file section taken whole: a rename, a mode change, a binary
//! file, a symlink, a created or deleted file), decided with one key as in
//! `git add -p`: `y` apply, `n` do not, `a`/`d` this and the rest of the
//! file, `s` split, `r` do not and say why, `k` back, `q` done, `?` help.
//! Ctrl+C or a closed terminal leaves the choice (the patch is saved).
//! What the decisions lead to is core's.

use anyhow::Result;
use console::{Key, Term, style};

use ah_core::present::terminal_safe;
use ah_core::run::{
    Choice, HunkDecision, Part, PatchHunks, PatchToChoose, Question, Unit, Verdict,
};

/// The longest reason `r` takes, in characters.
const MAX_REASON: usize = 500;

/// One unit being decided.
struct Entry {
    unit: Unit,
    verdict: Option<Verdict>,
}

/// What a key asked for.
enum Step {
    /// Show the unit at this index next.
    Show(usize),
    Done,
    Left,
}

/// Asks for each unit of the patch in turn; an error says why the patch
/// cannot be chosen hunk by hunk.
pub(super) fn pick(patch: &PatchToChoose<'_>) -> Result<Choice> {
    let hunks = patch.hunks()?;
    let term = Term::stderr();
    let mut entries: Vec<Entry> = hunks
        .units()
        .into_iter()
        .map(|unit| Entry {
            unit,
            verdict: None,
        })
        .collect();
    let mut at = 0;
    while at < entries.len() {
        show(&term, patch, hunks, &entries, at)?;
        match decide(&term, hunks, &mut entries, at)? {
            Step::Show(next) => at = next,
            Step::Done => break,
            Step::Left => return Ok(Choice::Left(Question::WhichHunks)),
        }
    }
    let decisions = entries
        .into_iter()
        .map(|entry| {
            Ok(HunkDecision {
                unit: entry.unit,
                header: hunks.header(entry.unit)?,
                verdict: entry.verdict.unwrap_or(Verdict::Undecided),
            })
        })
        .collect::<Result<_>>()?;
    Ok(Choice::Hunks(decisions))
}

/// Shows the unit at `at`: its file, its place, its lines.
fn show(
    term: &Term,
    patch: &PatchToChoose<'_>,
    hunks: &PatchHunks,
    entries: &[Entry],
    at: usize,
) -> Result<()> {
    let unit = entries[at].unit;
    let name = patch
        .files
        .get(unit.file)
        .map_or("?", |file| file.name.as_str());
    term.write_line("")?;
    term.write_line(&format!(
        "{} ({}/{})",
        style(name).bold(),
        at + 1,
        entries.len()
    ))?;
    if unit.part == Part::Whole {
        let what = hunks.header(unit)?;
        term.write_line(&style(what).yellow().to_string())?;
        return Ok(());
    }
    let (lines, cut) = hunks.lines(patch.patch, unit)?;
    term.write_line(&style(hunks.header(unit)?).cyan().to_string())?;
    term.write_str(&hunk_lines(&lines))?;
    if cut {
        term.write_line("… (more lines: the pager showed the whole patch)")?;
    }
    Ok(())
}

/// A hunk's lines for the terminal: each escaped (the model wrote them),
/// `-` lines red, `+` lines green, `\ No newline…` dim. Every hunk line
/// shown goes through here.
pub(super) fn hunk_lines(lines: &[u8]) -> String {
    let text = String::from_utf8_lossy(lines);
    let mut shown = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let safe = terminal_safe(line);
        let styled = match line.as_bytes().first() {
            Some(b'-') => style(safe).red().to_string(),
            Some(b'+') => style(safe).green().to_string(),
            Some(b'\\') => style(safe).dim().to_string(),
            _ => safe.into_owned(),
        };
        shown.push_str(&styled);
        shown.push('\n');
    }
    shown
}

/// Reads keys until one decides the unit at `at` or moves elsewhere.
fn decide(term: &Term, hunks: &PatchHunks, entries: &mut Vec<Entry>, at: usize) -> Result<Step> {
    let mut splits = hunks.split(entries[at].unit);
    let keys = offered(splits.is_some(), at > 0);
    let what = if entries[at].unit.part == Part::Whole {
        "change"
    } else {
        "hunk"
    };
    loop {
        term.write_str(&format!("Apply this {what} [{keys}]? "))?;
        let key = match super::menu::key() {
            Ok(Key::Char(c)) => c,
            Ok(Key::CtrlC) | Err(_) => {
                term.write_line("")?;
                return Ok(Step::Left);
            }
            Ok(_) => {
                term.write_line("")?;
                continue;
            }
        };
        term.write_line(&key.to_string())?;
        let verdict = match key {
            'y' | 'a' => Verdict::Accept,
            'n' | 'd' => Verdict::Reject { reason: None },
            'r' => match reason(term)? {
                Reason::Given(reason) => Verdict::Reject { reason },
                Reason::Back => continue,
                Reason::Left => return Ok(Step::Left),
            },
            's' if splits.is_some() => {
                let pieces = splits.take().unwrap_or_default();
                term.write_line(&format!("Split into {} hunks.", pieces.len()))?;
                let pieces = pieces.into_iter().map(|unit| Entry {
                    unit,
                    verdict: None,
                });
                entries.splice(at..=at, pieces);
                return Ok(Step::Show(at));
            }
            'k' if at > 0 => return Ok(Step::Show(at - 1)),
            'q' => return Ok(Step::Done),
            _ => {
                help(term, &keys)?;
                continue;
            }
        };
        entries[at].verdict = Some(verdict.clone());
        if matches!(key, 'a' | 'd') {
            let file = entries[at].unit.file;
            for entry in entries[at + 1..].iter_mut() {
                if entry.unit.file == file && entry.verdict.is_none() {
                    entry.verdict = Some(verdict.clone());
                }
            }
        }
        return Ok(next_undecided(entries, at).map_or(Step::Done, Step::Show));
    }
}

/// The keys offered for a unit, as `git add -p` lists them.
fn offered(can_split: bool, can_go_back: bool) -> String {
    let mut keys = vec!["y", "n", "a", "d"];
    if can_split {
        keys.push("s");
    }
    keys.push("r");
    if can_go_back {
        keys.push("k");
    }
    keys.extend(["q", "?"]);
    keys.join(",")
}

/// The first undecided unit after `at`, else the first before it.
fn next_undecided(entries: &[Entry], at: usize) -> Option<usize> {
    let undecided = |i: &usize| entries[*i].verdict.is_none();
    (at + 1..entries.len())
        .find(undecided)
        .or_else(|| (0..at).find(undecided))
}

fn help(term: &Term, keys: &str) -> Result<()> {
    let all = [
        ("y", "apply this hunk"),
        ("n", "do not apply this hunk"),
        ("a", "apply this hunk and the rest of this file's"),
        ("d", "apply none of the rest of this file's hunks"),
        ("s", "split this hunk into smaller ones"),
        ("r", "do not apply this hunk, and say why"),
        ("k", "go back to the previous hunk"),
        ("q", "done: the hunks not decided yet are not applied"),
        ("?", "this help"),
    ];
    for (key, what) in all {
        if keys.split(',').any(|k| k == key) {
            term.write_line(&format!("{key} - {what}"))?;
        }
    }
    Ok(())
}

/// What `r` read.
enum Reason {
    /// The reason, or none when the line was left empty.
    Given(Option<String>),
    /// Esc: back to the hunk.
    Back,
    /// Ctrl+C or a closed terminal.
    Left,
}

/// Reads one line of text for `r`: Enter ends it, Esc goes back.
fn reason(term: &Term) -> Result<Reason> {
    term.write_str("Why not (Enter ends, Esc goes back)? ")?;
    let mut text = String::new();
    loop {
        match super::menu::key() {
            Ok(Key::Enter) => {
                term.write_line("")?;
                let text = text.trim();
                return Ok(Reason::Given((!text.is_empty()).then(|| text.to_string())));
            }
            Ok(Key::Escape) => {
                term.write_line("")?;
                return Ok(Reason::Back);
            }
            Ok(Key::Backspace) => {
                if text.pop().is_some() {
                    term.clear_chars(1)?;
                }
            }
            Ok(Key::Char(c)) if !c.is_control() && text.chars().count() < MAX_REASON => {
                text.push(c);
                term.write_str(&terminal_safe(&c.to_string()))?;
            }
            Ok(Key::CtrlC) | Err(_) => {
                term.write_line("")?;
                return Ok(Reason::Left);
            }
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunk_lines_escape_what_the_model_wrote() {
        console::set_colors_enabled(false);
        let lines = " keep\n-old \u{1b}[2J\n+new \u{202E}x\n\\ No newline at end of file\n";
        assert_eq!(
            hunk_lines(lines.as_bytes()),
            " keep\n-old ^[[2J\n+new <U+202E>x\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn the_keys_offered_follow_the_unit() {
        assert_eq!(offered(true, true), "y,n,a,d,s,r,k,q,?");
        assert_eq!(offered(false, false), "y,n,a,d,r,q,?");
    }
}
