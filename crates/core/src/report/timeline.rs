//! A run's turns as its session recorded them, and their chart: for each
//! model answer that belongs to the run, how long the model call took (the
//! message's `api_latency_ms`) and how long the tool calls it asked for ran
//! (the `duration_ms` of their results, which name the run), with the
//! tokens the answers cost. A turn is found through its tool results, so
//! a run's answer before any tool call is shown only when tools followed it
//! or it was the answer to the run's last tool results.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::path::Path;

use anyhow::{Result, bail};

use super::html::escape;
use ah_llm::{Block, Role};
use ah_session::{Session, StoredMessage, Tokens};

/// One model answer of a run and the tools it called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Turn {
    /// The answer's `@N` in its session.
    pub seq: i64,
    pub model_ms: u64,
    pub tool_ms: u64,
    /// The names of the tools it called, in order.
    pub tools: Vec<String>,
}

/// The turns of run `run_id` in the session `db`, and their tokens.
pub(super) fn turns(db: &Path, run_id: &str) -> Result<(Vec<Turn>, Tokens)> {
    if !db.is_file() {
        bail!("its session {} is gone", db.display());
    }
    let tree = Session::open(db)?.tree()?;
    Ok(turns_of(tree.messages(), run_id))
}

fn run_of_result(message: &StoredMessage) -> Option<&str> {
    message
        .blocks
        .iter()
        .find(|b| matches!(b.block, Block::ToolResult { .. }))
        .and_then(|b| b.details.as_ref())
        .and_then(|d| d["run_id"].as_str())
}

/// [`turns`] of messages in `seq` order.
pub(super) fn turns_of(messages: &[StoredMessage], run_id: &str) -> (Vec<Turn>, Tokens) {
    // The run's tool results, by the answer they answer.
    let results: HashMap<&str, &StoredMessage> = messages
        .iter()
        .filter(|m| m.role == Role::User && run_of_result(m) == Some(run_id))
        .filter_map(|m| Some((m.parent_id.as_deref()?, m)))
        .collect();
    let result_ids: HashSet<&str> = results.values().map(|m| m.id.as_str()).collect();
    let mut tokens = Tokens::default();
    let mut turns = Vec::new();
    for answer in messages.iter().filter(|m| m.role == Role::Assistant) {
        let follows_result = answer
            .parent_id
            .as_deref()
            .is_some_and(|p| result_ids.contains(p));
        let answered = results.get(answer.id.as_str());
        if !follows_result && answered.is_none() {
            continue;
        }
        if let Some(usage) = &answer.meta.usage {
            tokens.input_tokens += usage.input_tokens;
            tokens.output_tokens += usage.output_tokens;
        }
        let tools = answer
            .blocks
            .iter()
            .filter_map(|b| match &b.block {
                Block::ToolUse { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        let tool_ms = answered
            .map(|m| m.blocks.iter().filter_map(|b| b.duration_ms).sum())
            .unwrap_or_default();
        turns.push(Turn {
            seq: answer.seq,
            model_ms: answer.meta.api_latency_ms.unwrap_or_default(),
            tool_ms,
            tools,
        });
    }
    (turns, tokens)
}

const ROW: u32 = 22;
const LABEL: u32 = 70;
const BAR: u32 = 520;
const WIDTH: u32 = LABEL + BAR + 190;

/// The turns as an inline SVG chart: one row a turn, the model's time then
/// the tools' time, on one scale for the run.
pub(super) fn svg(turns: &[Turn]) -> String {
    let longest = turns
        .iter()
        .map(|t| t.model_ms + t.tool_ms)
        .max()
        .unwrap_or_default()
        .max(1);
    let scale = |ms: u64| (ms as f64 * f64::from(BAR) / longest as f64).round() as u64;
    let height = ROW * (turns.len() as u32 + 1);
    let mut out =
        format!("<svg class=\"timeline\" width=\"{WIDTH}\" height=\"{height}\" role=\"img\">");
    for (i, turn) in turns.iter().enumerate() {
        let y = ROW * i as u32;
        let model = scale(turn.model_ms);
        let tool = scale(turn.tool_ms);
        let tools = if turn.tools.is_empty() {
            "no tools".to_string()
        } else {
            turn.tools.join(", ")
        };
        let _ = write!(
            out,
            "<g class=\"turn\"><title>@{seq}: model {m}, tools {t} ({names})</title>\
             <text x=\"0\" y=\"{ty}\">turn {n}</text>\
             <rect class=\"model\" x=\"{LABEL}\" y=\"{ry}\" width=\"{model}\" height=\"14\"/>\
             <rect class=\"tool\" x=\"{tx}\" y=\"{ry}\" width=\"{tool}\" height=\"14\"/>\
             <text x=\"{lx}\" y=\"{ty}\">{m} + {t}</text></g>",
            seq = turn.seq,
            n = i + 1,
            m = seconds(turn.model_ms),
            t = seconds(turn.tool_ms),
            names = escape(&tools),
            ty = y + 14,
            ry = y + 3,
            tx = u64::from(LABEL) + model,
            lx = u64::from(LABEL) + model + tool + 6,
        );
    }
    let y = ROW * turns.len() as u32 + 14;
    let _ = write!(
        out,
        "<rect class=\"model\" x=\"{LABEL}\" y=\"{}\" width=\"12\" height=\"10\"/>\
         <text x=\"{}\" y=\"{y}\">model call</text>\
         <rect class=\"tool\" x=\"{}\" y=\"{}\" width=\"12\" height=\"10\"/>\
         <text x=\"{}\" y=\"{y}\">tool calls</text></svg>",
        y - 9,
        LABEL + 16,
        LABEL + 110,
        y - 9,
        LABEL + 126,
    );
    out
}

/// `ms` for a person: milliseconds under a second (`740 ms`), else
/// seconds with one decimal (`1.2 s`).
pub(super) fn seconds(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as ah writes them
/// (`2024-02-29T12:34:56.789Z`); `None` for anything else.
pub(super) fn parse_rfc3339_ms(text: &str) -> Option<u64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut date = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (date.next()??, date.next()??, date.next()??);
    let (hms, millis) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, min, s) = (hms.next()??, hms.next()??, hms.next()??);
    let millis: i64 = millis.parse().ok()?;
    // Howard Hinnant's `days_from_civil`.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 24 + h) * 60 + min) * 60 * 1000 + s * 1000 + millis;
    u64::try_from(ms).ok()
}
