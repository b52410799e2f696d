//! The read-only views of one session: `ah scan`, `ah tree`,
//! `ah branches`, `ah diff`, `ah show`. The head is marked `>` (and bold
//! when the terminal takes colour), so the mark survives `NO_COLOR` and
//! pipes.

use anyhow::{Context, Result};
use console::style;

use super::super::EXIT_OK;
use super::summary::{ScanEntry, last_text, row};
use ah_core::present::{count, terminal_safe};
use ah_core::sessions::{Block, Session, StoredMessage, Tree, message, no_message};

/// The mark before the head's line.
const HEAD_MARK: &str = ">";

/// `ah scan`: the branch from the root to the head.
pub(super) fn scan(session: &Session, json: bool) -> Result<i32> {
    let Some(head) = session.head()? else {
        eprintln!("session {} has no messages yet", session.id());
        if json {
            println!("[]");
        }
        return Ok(EXIT_OK);
    };
    let path = session.path_to(&head)?;
    if json {
        let entries: Vec<ScanEntry> = path
            .iter()
            .map(|m| ScanEntry::new(m, m.id == head))
            .collect();
        println!(
            "{}",
            serde_json::to_string(&entries).context("cannot encode the scan")?
        );
        return Ok(EXIT_OK);
    }
    for message in &path {
        println!("{}", marked(message.id == head, &row(message)));
    }
    Ok(EXIT_OK)
}

/// `ah tree`: every message, a branch point's children indented under it.
pub(super) fn tree(session: &Session) -> Result<i32> {
    let tree = session.tree()?;
    if tree.messages().is_empty() {
        eprintln!("session {} has no messages yet", session.id());
        return Ok(EXIT_OK);
    }
    for line in draw(&tree) {
        println!("{line}");
    }
    Ok(EXIT_OK)
}

/// The lines of `ah tree`. A message with one child is followed by it at
/// the same depth; the children of a branch point hang under it with `├─`
/// and `└─`. Tips end in `[tip]`, branch points in `[N branches]`.
pub(super) fn draw(tree: &Tree) -> Vec<String> {
    let head = tree.head().map(|m| m.id.as_str());
    let mut lines = Vec::with_capacity(tree.messages().len());
    // Iterative, so a long conversation cannot overflow the stack.
    let mut stack: Vec<(&StoredMessage, String, String)> = tree
        .roots()
        .into_iter()
        .rev()
        .map(|root| (root, String::new(), String::new()))
        .collect();
    while let Some((message, first, rest)) = stack.pop() {
        let children = tree.children(message);
        let tag = match children.len() {
            0 => "  [tip]".to_string(),
            1 => String::new(),
            n => format!("  [{n} branches]"),
        };
        let text = format!("{first}{}{tag}", row(message));
        lines.push(marked(Some(message.id.as_str()) == head, &text));
        match children.as_slice() {
            [] => {}
            [only] => stack.push((only, rest.clone(), rest)),
            many => {
                for (i, child) in many.iter().enumerate().rev() {
                    let last = i + 1 == many.len();
                    let (branch, under) = if last {
                        ("└─ ", "   ")
                    } else {
                        ("├─ ", "│  ")
                    };
                    stack.push((child, format!("{rest}{branch}"), format!("{rest}{under}")));
                }
            }
        }
    }
    lines
}

/// `ah branches`: one line per tip.
pub(super) fn branches(session: &Session) -> Result<i32> {
    let tree = session.tree()?;
    let head = tree.head();
    for tip in tree.tips() {
        let path = tree.path(tip);
        let is_head = head.is_some_and(|h| h.id == tip.id);
        let text = format!(
            "@{:<4} {:>4} messages  {}",
            tip.seq,
            path.len(),
            terminal_safe(&last_text(path.into_iter()))
        );
        println!("{}", marked(is_head, &text));
    }
    if let Some(head) = head.filter(|h| !tree.children(h).is_empty()) {
        println!(
            "head is @{} (not a tip: the next prompt starts a new branch there)",
            head.seq
        );
    }
    Ok(EXIT_OK)
}

/// `ah diff @A @B`: the common ancestor, then each side after it.
pub(super) fn diff(session: &Session, a: i64, b: i64) -> Result<i32> {
    let tree = session.tree()?;
    let side = |seq| tree.at(seq).ok_or(seq);
    let (left, right) = match (side(a), side(b)) {
        (Ok(left), Ok(right)) => (left, right),
        (Err(missing), _) | (_, Err(missing)) => return Err(no_message(session, missing)?),
    };
    let common = tree.common_ancestor(left, right);
    match common {
        Some(c) => println!("common ancestor: {}", row(c)),
        None => println!("common ancestor: none (@{a} and @{b} start from different roots)"),
    }
    for end in [left, right] {
        let after: Vec<&StoredMessage> = tree
            .path(end)
            .into_iter()
            .filter(|m| common.is_none_or(|c| m.seq > c.seq))
            .collect();
        println!();
        match common {
            Some(c) if after.is_empty() => {
                println!(
                    "@{}: nothing after @{} (it is the common ancestor)",
                    end.seq, c.seq
                )
            }
            _ => println!(
                "@{}: {} after the common ancestor",
                end.seq,
                count(after.len(), "message", "messages")
            ),
        }
        for message in after {
            println!("  {}", row(message));
        }
    }
    Ok(EXIT_OK)
}

/// `ah show @N`: one message in full.
pub(super) fn show(session: &Session, seq: i64) -> Result<i32> {
    let message = message(session, seq)?;
    let tree = session.tree()?;
    let children: Vec<String> = tree
        .children(&message)
        .iter()
        .map(|c| format!("@{}", c.seq))
        .collect();
    let parent = message
        .parent_id
        .as_ref()
        .and_then(|p| tree.messages().iter().find(|m| &m.id == p))
        .map_or("none (a root)".to_string(), |p| format!("@{}", p.seq));
    let is_head = tree.head().is_some_and(|h| h.id == message.id);
    println!(
        "@{} {}{}",
        message.seq,
        message.role.as_str(),
        if is_head { "  (head)" } else { "" }
    );
    println!("id:        {}", message.id);
    if let Some(agent) = &message.agent {
        println!("agent:     {}", terminal_safe(agent));
    }
    println!("created:   {}", terminal_safe(&message.created_at));
    println!("parent:    {parent}");
    if !children.is_empty() {
        println!("children:  {}", children.join(", "));
    }
    let meta = &message.meta;
    if let Some(model) = &meta.model {
        println!("model:     {}", terminal_safe(model));
    }
    if let Some(usage) = meta.usage {
        println!(
            "tokens:    {} in, {} out",
            usage.input_tokens, usage.output_tokens
        );
    }
    if let Some(stop) = &meta.stop_reason {
        println!("stop:      {}", terminal_safe(stop));
    }
    if let Some(ms) = meta.api_latency_ms {
        println!("latency:   {ms} ms");
    }
    for (i, record) in message.blocks.iter().enumerate() {
        println!();
        let n = i + 1;
        match &record.block {
            Block::Text { text } => {
                println!("[{n}] text");
                println!("{}", indent(text));
            }
            Block::Thinking { thinking, .. } => {
                println!("[{n}] thinking");
                println!("{}", indent(thinking));
            }
            Block::RedactedThinking { .. } => println!("[{n}] redacted thinking"),
            Block::Image { source } => {
                // What the model was sent: the image, once, as base64.
                let bytes = source.data.len() / 4 * 3;
                println!(
                    "[{n}] image {}, about {} KB, sent to the model as an image block",
                    terminal_safe(&source.media_type),
                    bytes.div_ceil(1024)
                );
                if let Some(path) = record.details.as_ref().and_then(|d| d["path"].as_str()) {
                    println!("  read from {}", terminal_safe(path));
                }
            }
            Block::ToolUse { id, name, input } => {
                println!(
                    "[{n}] tool call {}  id {}",
                    terminal_safe(name),
                    terminal_safe(id)
                );
                let json =
                    serde_json::to_string_pretty(input).context("cannot show a tool input")?;
                println!("{}", indent(&json));
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let name = record.tool_name.as_deref().unwrap_or("tool");
                let outcome = if *is_error { "error" } else { "ok" };
                let took = record
                    .duration_ms
                    .map_or(String::new(), |ms| format!("  {ms} ms"));
                println!(
                    "[{n}] tool result {}  id {}  {outcome}{took}",
                    terminal_safe(name),
                    terminal_safe(tool_use_id)
                );
                println!("  told the model:");
                println!("{}", indent(content));
                if let Some(output) = &record.tool_output {
                    println!("  whole output:");
                    println!("{}", indent(output));
                }
            }
        }
        if let Some(details) = &record.details {
            println!("  details: {}", terminal_safe(&details.to_string()));
        }
    }
    Ok(EXIT_OK)
}

/// `text` with the head mark (and bold) when `is_head`, else two spaces.
fn marked(is_head: bool, text: &str) -> String {
    if is_head {
        format!("{HEAD_MARK} {}", style(text).bold())
    } else {
        format!("  {text}")
    }
}

/// Every line of `text` indented four spaces, safe for the terminal.
fn indent(text: &str) -> String {
    terminal_safe(text)
        .lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
