//! The router's reading of an agent's final text: its routing tags.
//! `@@name` addresses that agent, `@@group` (or `@@all`, as models often
//! write it) every other agent, `@@user` the human. A tag is `@@` followed
//! by a name (letters, digits, `-`, `_`), not preceded by a letter, a digit
//! or another `@` (`a@@b` is no tag); a name never ends in `_` or `-`
//! (`_@@coder_` names `coder`), and `@@group`, `@@all` and `@@user` may be
//! written in any case.
//! Text inside code — fenced blocks (```` ``` ```` or `~~~`, closed by a
//! like fence) and inline code (a run of backticks up to the same run) — is
//! not read: an agent may quote a tag without sending anything.

/// Who a tag names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    Group,
    User,
    /// An agent's name as written (it may name no agent).
    Name(String),
}

/// The tags of `text`, in order of first appearance, each once.
pub fn tags(text: &str) -> Vec<Tag> {
    let mut found = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some((mark, len)) = fence_of(trimmed) {
            match fence {
                None => fence = Some((mark, len)),
                Some((open, open_len)) if open == mark && len >= open_len => {
                    if trimmed.trim_end().chars().all(|c| c == mark) {
                        fence = None;
                    }
                }
                Some(_) => {}
            }
            continue;
        }
        if fence.is_none() {
            line_tags(line, &mut found);
        }
    }
    found
}

/// A fence line's character and length (three or more backticks or tildes).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let mark = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == mark).count();
    (len >= 3).then_some((mark, len))
}

/// The tags of one line outside fences, skipping inline code.
fn line_tags(line: &str, found: &mut Vec<Tag>) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '`' {
            let run = chars[i..].iter().take_while(|c| **c == '`').count();
            match closing_run(&chars, i + run, run) {
                Some(end) => i = end + run,
                // An unclosed run is plain text.
                None => i += run,
            }
            continue;
        }
        let starts_tag = chars[i] == '@'
            && chars.get(i + 1) == Some(&'@')
            && (i == 0 || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '@'));
        if !starts_tag {
            i += 1;
            continue;
        }
        let word: String = chars[i + 2..]
            .iter()
            .take_while(|c| is_name_char(**c))
            .collect();
        i += 2 + word.chars().count();
        // `_@@coder_` is emphasis around a tag: no name ends in `_` or `-`.
        let name = word.trim_end_matches(['_', '-']);
        if name.is_empty() {
            continue;
        }
        let tag = match name.to_ascii_lowercase().as_str() {
            "group" | "all" => Tag::Group,
            "user" => Tag::User,
            _ => Tag::Name(name.to_string()),
        };
        if !found.contains(&tag) {
            found.push(tag);
        }
    }
}

/// Where a run of exactly `len` backticks starts at or after `from`.
fn closing_run(chars: &[char], from: usize, len: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        if run == len {
            return Some(i);
        }
        i += run;
    }
    None
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Tag {
        Tag::Name(text.to_string())
    }

    #[test]
    fn tags_in_order_each_once() {
        assert_eq!(
            tags("@@coder please fix it, then @@tester check; @@coder again. @@user ok? @@group"),
            [name("coder"), name("tester"), Tag::User, Tag::Group]
        );
    }

    #[test]
    fn no_tag_inside_code() {
        let text = "Use `@@coder` to address.\n```\n@@tester\n```\n~~~~\n@@x\n```\n@@y\n~~~~\n``a `@@z` b`` done @@lead";
        assert_eq!(tags(text), [name("lead")]);
    }

    #[test]
    fn an_unclosed_fence_hides_the_rest_and_an_unclosed_backtick_does_not() {
        assert_eq!(tags("see ` here @@lead\n```\n@@coder"), [name("lead")]);
    }

    #[test]
    fn emails_and_lone_marks_are_not_tags() {
        assert_eq!(tags("mail a@@b.c, @@ alone, @@@x, (@@ok)"), [name("ok")]);
        assert_eq!(tags("@@coder: done"), [name("coder")]);
        assert_eq!(
            tags("_@@coder_ and **@@User** and @@GROUP-"),
            [name("coder"), Tag::User, Tag::Group]
        );
        // `@@all` is `@@group`, once.
        assert_eq!(tags("@@all and @@group, @@All"), [Tag::Group]);
    }
}
