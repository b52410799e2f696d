//! Reads the text protocol's directives out of a finished reply:
//! `##file:PATH` followed by a fenced block (the file's whole content),
//! `##run` followed by a block tagged `sh` (a command), and `##tool NAME`
//! followed by a block holding the tool's input as a JSON object. The reply is parsed
//! once, whole, after it has streamed in, so each directive is found once
//! however the text was cut. Directives inside other fenced blocks (an
//! example the model shows) are not directives.

/// One thing the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Directive {
    /// Write `content` to `path` (as the model wrote it; the write tool
    /// normalises and confines it).
    File { path: String, content: String },
    /// Run `command` with bash in /work.
    Run { command: String },
    /// Call the tool `name` with `input` (a JSON object).
    Tool {
        name: String,
        input: serde_json::Value,
    },
    /// A directive that cannot be carried out: `head` is its line, `why`
    /// tells the model what to fix.
    Broken { head: String, why: String },
}

/// Languages a `##run` block may be tagged with.
const SHELLS: [&str; 3] = ["sh", "bash", "shell"];

/// A fence line: its backtick count and its info string.
fn fence(line: &str) -> Option<(usize, &str)> {
    let body = line.trim_end_matches(['\n', '\r']);
    let indent = body.len() - body.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let body = &body[indent..];
    let ticks = body.len() - body.trim_start_matches('`').len();
    (ticks >= 3).then(|| (ticks, body[ticks..].trim()))
}

/// Whether `line` closes a fence opened with `ticks` backticks.
fn closes(line: &str, ticks: usize) -> bool {
    matches!(fence(line), Some((n, info)) if n >= ticks && info.is_empty())
}

/// The directives of `text`, in order.
pub(crate) fn directives(text: &str) -> Vec<Directive> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        let head = line.trim();
        at += 1;
        if let Some((ticks, _)) = fence(line) {
            // Someone else's block: skipped whole.
            while at < lines.len() && !closes(lines[at], ticks) {
                at += 1;
            }
            at += 1;
            continue;
        }
        let kind = if let Some(path) = head.strip_prefix("##file:") {
            Kind::File(path.trim())
        } else if head == "##run" {
            Kind::Run
        } else if head == "##tool" {
            Kind::Tool("")
        } else if let Some(name) = head.strip_prefix("##tool ") {
            Kind::Tool(name.trim())
        } else {
            continue;
        };
        let (block, next) = block_after(&lines, at);
        at = next;
        found.push(directive(head, kind, block));
    }
    found
}

enum Kind<'a> {
    File(&'a str),
    Run,
    Tool(&'a str),
}

/// What follows a directive line: a fenced block (its info string and
/// content, or `None` when it is never closed), or nothing.
enum Block<'a> {
    Fenced(&'a str, Option<String>),
    Missing,
}

/// The block starting at `at` (blank lines before it are skipped), and
/// where reading goes on.
fn block_after<'a>(lines: &[&'a str], mut at: usize) -> (Block<'a>, usize) {
    while at < lines.len() && lines[at].trim().is_empty() {
        at += 1;
    }
    let Some((ticks, info)) = lines.get(at).and_then(|line| fence(line)) else {
        return (Block::Missing, at);
    };
    let mut content = String::new();
    for (offset, line) in lines[at + 1..].iter().enumerate() {
        if closes(line, ticks) {
            return (Block::Fenced(info, Some(content)), at + offset + 2);
        }
        content.push_str(line);
    }
    (Block::Fenced(info, None), lines.len())
}

fn directive(head: &str, kind: Kind<'_>, block: Block<'_>) -> Directive {
    let broken = |why: &str| Directive::Broken {
        head: head.to_string(),
        why: why.to_string(),
    };
    match (kind, block) {
        (_, Block::Missing) => broken("a fenced block (```) must follow on the next line"),
        (_, Block::Fenced(_, None)) => broken("its fenced block is never closed with ```"),
        (Kind::File(""), _) => broken("it names no file: write ##file:PATH"),
        (Kind::File(path), Block::Fenced(_, Some(content))) => Directive::File {
            path: path.to_string(),
            content,
        },
        (Kind::Tool(""), _) => broken("it names no tool: write ##tool NAME"),
        (Kind::Tool(name), Block::Fenced(_, Some(json))) => {
            match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(input) if input.is_object() => Directive::Tool {
                    name: name.to_string(),
                    input,
                },
                Ok(_) => broken("its block must hold a JSON object: {\"field\": …}"),
                Err(err) => broken(&format!("its block is not JSON ({err})")),
            }
        }
        (Kind::Run, Block::Fenced(info, Some(command))) => {
            let tag = info.split_whitespace().next().unwrap_or("");
            if SHELLS.contains(&tag) {
                Directive::Run { command }
            } else {
                broken("its block must be tagged sh: ```sh")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> Directive {
        Directive::File {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn files_and_commands_are_found_in_order() {
        let text = "I will add it.\n##file:src/a.py\n```python\nprint(1)\n\nx = 2\n```\n\
                    Then test:\n##run\n```sh\npython3 src/a.py\n```\nDone.";
        assert_eq!(
            directives(text),
            vec![
                file("src/a.py", "print(1)\n\nx = 2\n"),
                Directive::Run {
                    command: "python3 src/a.py\n".into()
                },
            ]
        );
    }

    #[test]
    fn a_longer_fence_keeps_inner_fences_and_blank_lines_may_precede_it() {
        let text = "##file: README.md \n\n````markdown\n# T\n```sh\nls\n```\n````\n";
        assert_eq!(
            directives(text),
            vec![file("README.md", "# T\n```sh\nls\n```\n")]
        );
    }

    #[test]
    fn directives_inside_other_blocks_are_examples() {
        let text = "Use it like this:\n```\n##file:x\n```\nnot a block\n```\n```\n";
        assert_eq!(directives(text), vec![]);
    }

    #[test]
    fn broken_directives_say_what_to_fix() {
        let broken = |text: &str| match directives(text).as_slice() {
            [Directive::Broken { why, .. }] => why.clone(),
            other => panic!("{other:?}"),
        };
        assert!(broken("##file:a\nno block").contains("fenced block"));
        assert!(broken("##file:a\n```\nunclosed").contains("never closed"));
        assert!(broken("##file:\n```\nx\n```").contains("names no file"));
        assert!(broken("##run\n```python\nprint()\n```").contains("tagged sh"));
        assert_eq!(
            directives("##run\n```bash -e\nls\n```"),
            vec![Directive::Run {
                command: "ls\n".into()
            }]
        );
        assert_eq!(directives("## run\n##files:x\ntext ##run\n"), vec![]);
        assert!(broken("##tool \n```json\n{}\n```").contains("names no tool"));
        assert!(broken("##tool lint\n```json\n[1]\n```").contains("JSON object"));
        assert!(broken("##tool lint\n```json\n{oops\n```").contains("not JSON"));
    }

    #[test]
    fn a_tool_call_carries_its_json_input() {
        let text = "Linting:\n##tool lint\n```json\n{\"files\": [\"a.rs\"]}\n```\n";
        assert_eq!(
            directives(text),
            vec![Directive::Tool {
                name: "lint".into(),
                input: serde_json::json!({"files": ["a.rs"]}),
            }]
        );
    }
}
